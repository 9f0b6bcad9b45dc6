package knowledge_test

import (
	"testing"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// Entries of the shop's FAQ (examples/agents/help-center/faq.yaml).
var (
	cancelOrder = &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "How do I cancel an order?",
		Questions: []string{"How do I cancel an order?", "Can I cancel my order?", "How can I cancel an order I just placed?", "What is your cancellation policy?"},
		Answer:    "Unpaid orders can be cancelled in the order page or by the assistant, and are cancelled automatically after 15 minutes. A paid order can be cancelled in the app with a full refund until the restaurant accepts it; after that, request cancellation, and once the rider has picked it up it cannot be cancelled."}
	orderingHours = &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "几点可以点外卖？",
		Questions: []string{"几点可以点外卖？", "你们营业到几点？", "晚上几点以后就不能下单了？", "深夜可以送餐吗？"},
		Answer:    "每天 10:00 至 22:00 可以下单。上海和杭州 22:00 至次日 02:00 有夜间配送，每单加收 3 元。"}
	cancelGold = &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "怎么取消金卡会员？",
		Questions: []string{"怎么取消金卡会员？", "金卡会员怎么关闭自动续费？", "不想续费会员了怎么办？"},
		Answer:    "在「我的 › 会员中心 › 管理自动续费」中关闭自动续费即可，权益保留到当期结束。"}
	refundTime = &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "When will I get my refund?",
		Questions: []string{"When will I get my refund?", "How long does a refund take?", "Where does my refund go?", "How many days until a refund arrives?"},
		Answer:    "Refunds go back to the payment method you used: instantly to your balance, in 1 to 3 working days to WeChat Pay or Alipay, and in 3 to 7 working days to a bankcard."}
	learnedParcel = &knowledge.CacheHit{Kind: knowledge.CacheEntryLearned, Question: "where is my parcel KXPQRT",
		Answer: "Parcel KXPQRT is at the depot."}
)

func TestCheckHit(t *testing.T) {
	for _, tt := range []struct {
		name  string
		asked string
		hit   *knowledge.CacheHit
		gate  knowledge.Gate // "" passes
	}{
		{"a variant's words", "can I cancel my order", cancelOrder, ""},
		{"an FAQ question in other function words", "how could I cancel the order?", cancelOrder, ""},
		{"words of the answer", "can I cancel a paid order after the restaurant accepts it", cancelOrder, ""},
		{"Chinese in other function words", "你们几点营业到几点", orderingHours, ""},
		{"a plural", "how long do refunds take", refundTime, ""},
		{"one word that is all a variant says", "我想退货", &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "我想退货",
			Questions: []string{"怎么退货？", "如何退货", "我想退货"}, Answer: "在订单页点击申请退货。"}, ""},

		{"a misspelt word of the entry", "how do i cancle my order", cancelOrder, ""},
		{"misspellings of a variant's words", "how many days untill a refnd arrives", refundTime, ""},
		{"Chinese fillers", "退款一般多久才能到呀", &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "退款多久到账？",
			Questions: []string{"退款多久到账？", "退款什么时候到？"}, Answer: "1 到 3 个工作日到账。"}, ""},

		{"a short word one letter from the entry's", "can I pay by cart", &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ,
			Question: "Can I pay by card?", Answer: "Yes, by card or in cash."}, knowledge.GateExtraWords},
		{"a word one letter from two of the entry's", "how do I cancel my ordes", &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ,
			Question: "How do I cancel orders or order codes?", Answer: "In the app."}, knowledge.GateExtraWords},
		{"a qualifier the entry lacks", "how do I remove one dish from my order", cancelOrder, knowledge.GateExtraWords},
		{"a holiday", "春节期间几点可以点外卖", orderingHours, knowledge.GateExtraWords},
		{"an order number", "when will I get my refund for order 20241108", refundTime, knowledge.GateSpecifics},
		{"an amount", "when will I get my refund of ¥38.5", refundTime, knowledge.GateSpecifics},
		{"another tier", "怎么取消铂金会员", cancelGold, knowledge.GateExtraWords},
		{"another city", "北京有夜间配送吗", orderingHours, knowledge.GateExtraWords},
		{"one word", "cancel", cancelOrder, knowledge.GateVague},
		{"one Chinese word", "会员", cancelGold, knowledge.GateVague},
		{"three characters that are most of a variant", "取消会员", &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "取消会员",
			Questions: []string{"怎么取消金卡会员？", "取消会员"}, Answer: cancelGold.Answer}, ""},
		{"a word all a variant has", "手机号", &knowledge.CacheHit{Kind: knowledge.CacheEntryFAQ, Question: "手机号怎么换",
			Questions: []string{"怎么更换绑定的手机号？", "手机号怎么换"}, Answer: "在「我的 › 账号与安全」中更换手机号。"}, knowledge.GateVague},
		{"a learned answer for another code", "where is my parcel ZMWLVB", learnedParcel, knowledge.GateSpecifics},
		{"a learned answer without its code", "where is my parcel", learnedParcel, knowledge.GateSpecifics},
		{"a learned answer for another dish", "do you have dishes with no eggs", &knowledge.CacheHit{Kind: knowledge.CacheEntryLearned,
			Question: "do you have dishes with no meat", Answer: "Yes: the vegetarian menu has no meat."}, knowledge.GateSpecifics},
		{"a learned answer for another city", "is there night delivery in beijing", &knowledge.CacheHit{Kind: knowledge.CacheEntryLearned,
			Question: "is there night delivery in shanghai", Answer: "Yes, in shanghai from 22:00."}, knowledge.GateSpecifics},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := knowledge.CheckHit(tt.asked, tt.hit)
			if v.Passed != (tt.gate == "") || v.Gate != tt.gate {
				t.Fatalf("passed %v gate %q (%s), want gate %q", v.Passed, v.Gate, v.Reason(), tt.gate)
			}
		})
	}
}

func TestVerdictReason(t *testing.T) {
	v := knowledge.CheckHit("how do I remove one dish from my order", cancelOrder)
	if got, want := v.Reason(), `the question asks about "remove", "one", "dish", which the entry does not mention`; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	v = knowledge.CheckHit("How do I cancel a scheduled order?", cancelOrder)
	if got, want := v.Reason(), `the question asks about "scheduled", which the entry does not mention`; got != want {
		t.Errorf("reason %q, want %q (the words as asked, not their stems)", got, want)
	}
	v = knowledge.CheckHit("when will I get my refund for order 20241108", refundTime)
	if got, want := v.Reason(), `the question names "20241108", which the entry does not`; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}

// BenchmarkCheckHit is the gates' cost on a hit, beside the lookup's (the index's
// FAQ benchmarks): the question and the entry are analysed once each.
func BenchmarkCheckHit(b *testing.B) {
	for b.Loop() {
		knowledge.CheckHit("can I cancel a paid order after the restaurant accepts it", cancelOrder)
	}
}
