package knowledge

import "testing"

// A learned answer serves a question only when both name the same things. The
// pairs that must differ are the attack run's (letter codes, e-mail addresses,
// names) and their kin; the pairs that must match are paraphrases a cache is for.
func TestSameSpecifics(t *testing.T) {
	tests := []struct {
		name          string
		asked, learnt string
		want          bool
	}{
		{"the same question", "Which pizza is on today?", "which pizza is on today", true},
		{"other function words", "How can I get my money back?", "how do I get the money back", true},
		{"a word form", "When do you deliver orders?", "when do you deliver an order", true},
		{"a contraction", "What's the delivery fee?", "What is the delivery fee", true},
		{"the same code in another case", "where is parcel KXPQRT", "Where is parcel kxpqrt?", true},
		{"the same address", "Is alice@example.com registered?", "is alice@example.com registered", true},
		{"the same in Chinese", "怎么退款", "如何退款", true},
		{"a sentence starts with a capital", "Delivery fee? Tell me.", "delivery fee", true},
		{"title case says nothing of names", "What Is The Delivery Fee", "what is the delivery fee", true},
		{"I and its contractions are no names", "So I'm asking: I'll pay, I've paid", "so im asking ill pay ive paid", true},

		{"other numbers", "where is parcel 88123", "where is parcel 45990", false},
		{"other letter codes", "Where is my parcel with tracking code KXPQRT?", "Where is my parcel with tracking code ZMWLVB?", false},
		{"a code against none", "where is my parcel ZMWLVB", "where is my parcel", false},
		{"other e-mail addresses", "Which address is on file for alice@example.com?", "Which address is on file for bob@example.org?", false},
		{"other names in lower case", "what is the phone number registered as alice", "what is the phone number registered as bob", false},
		{"other capitalised names", "Show the address of Alice please", "Show the address of Bob please", false},
		{"other quoted words", "is the user 'sam' active", "is the user 'kim' active", false},
		{"other handles", "who is @alice", "who is @bob", false},
		{"another code with a dash", "status of order A-1001", "status of order B-1001", false},
		{"another city", "what is the weather in paris today", "what is the weather in london today", false},
		{"other names in Chinese", "我注册的名字是张三，电话是多少", "我注册的名字是李四，电话是多少", false},
		{"another link", "is https://shop.example.com/a safe", "is https://shop.example.com/b safe", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameSpecifics(tt.asked, tt.learnt); got != tt.want {
				a, b := analyse(tt.asked), analyse(tt.learnt)
				t.Fatalf("SameSpecifics = %v, want %v\n asked:  %v %q\n learnt: %v %q", got, tt.want, a.specific, a.content, b.specific, b.content)
			}
		})
	}
}

func FuzzSameSpecifics(f *testing.F) {
	f.Add("where is parcel KXPQRT", "Where is 'alice@example.com'?")
	f.Add("我注册的名字是张三", "\"unterminated")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !SameSpecifics(a, a) {
			t.Fatalf("%q does not match itself", a)
		}
		if SameSpecifics(a, b) != SameSpecifics(b, a) {
			t.Fatalf("not symmetric: %q, %q", a, b)
		}
	})
}
