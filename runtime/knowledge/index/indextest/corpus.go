package indextest

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/agentrun/agentrun/runtime/knowledge"
)

// Words are the real words of the corpus (the rest are made up).
var Words = strings.Fields(`order refund delivery courier parcel address payment card invoice account
password coupon discount voucher store opening hours holiday closed menu allergen vegetarian spicy
rice noodle soup drink tea coffee cake late missing wrong damaged cold replace cancel change phone
email receipt tax member points level gift wrap driver tip rating review complaint manager branch
city district express standard weekend morning evening minute hour day week month price fee free
minimum basket checkout app website login verify code message notification language setting`)

var han = []rune("订单退款配送地址支付发票账户密码优惠券门店营业时间节假日菜单辣米饭面条汤饮料茶咖啡蛋糕迟到丢失错误损坏取消修改电话会员积分礼品司机评价投诉城市快递运费价格")

// Synthetic returns n text chunks of 60 words (English) or 80 characters (Chinese,
// one chunk in four), deterministic. Words follow Zipf's law over a vocabulary of
// 5000 (the real words above at random ranks, the rest made up), as in real text,
// so some query terms are in most chunks and some in few.
func Synthetic(n int) []knowledge.Chunk {
	r := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	syllables := strings.Fields("ka lo mi re sun ta pe vo ri ang del mor tis ue ban cor")
	for i := range vocab {
		vocab[i] = syllables[r.IntN(len(syllables))] + syllables[r.IntN(len(syllables))] + syllables[r.IntN(len(syllables))]
	}
	for _, w := range Words {
		vocab[r.IntN(len(vocab))] = w
	}
	zipf := rand.NewZipf(r, 1.07, 2, uint64(len(vocab)-1))
	out := make([]knowledge.Chunk, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		if i%4 == 3 {
			for range 80 {
				b.WriteRune(han[r.IntN(len(han))])
			}
		} else {
			for j := range 60 {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(vocab[zipf.Uint64()])
			}
		}
		text := b.String()
		out[i] = knowledge.Chunk{
			Source: fmt.Sprintf("doc%04d.md", i/100), Heading: fmt.Sprintf("Section %d", i%100),
			StartLine: i%100*10 + 1, EndLine: i%100*10 + 9, Text: text, Kind: knowledge.ChunkText,
			Hash: fmt.Sprintf("%016x", r.Uint64()),
		}
	}
	return out
}

// Queries are questions a user of the corpus might ask, English and Chinese.
var Queries = []string{
	"where is my parcel, the courier is late",
	"how do I get a refund for a damaged cake",
	"change the delivery address of my order",
	"opening hours on holiday weekend",
	"我的订单配送迟到了",
	"退款什么时候到账",
}

// Question is question i of a synthetic FAQ log: 6 to 10 words (or 8 to 14
// Chinese characters, one in three), distinct for every i.
func Question(r *rand.Rand, i int) string {
	var b strings.Builder
	if i%3 == 2 {
		for range 8 + r.IntN(7) {
			b.WriteRune(han[r.IntN(len(han))])
		}
		fmt.Fprintf(&b, "%d", i)
		return b.String()
	}
	for j := range 6 + r.IntN(5) {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Words[r.IntN(len(Words))])
	}
	fmt.Fprintf(&b, " %d", i)
	return b.String()
}
