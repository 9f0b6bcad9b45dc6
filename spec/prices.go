package spec

import "regexp"

// PriceTableDate is the date the bundled price table's list prices are as of.
const PriceTableDate = "2026-11-30"

// priceTable holds the public list prices, in US dollars per million tokens, of
// well-known model names as of PriceTableDate. Providers change them; a spec's
// model.pricing overrides an entry. Where a provider prices by prompt length
// (gemini-2.5-pro, qwen-*), the entry is the shortest prompts' tier. A dated snapshot
// priced unlike its model has an entry of its own, which wins over the suffix rule.
var priceTable = map[string]Pricing{
	// OpenAI
	"gpt-4o":            {Input: 2.50, CachedInput: 1.25, Output: 10.00},
	"gpt-4o-2024-05-13": {Input: 5.00, Output: 15.00},
	"gpt-4o-mini":       {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"gpt-4.1":           {Input: 2.00, CachedInput: 0.50, Output: 8.00},
	"gpt-4.1-mini":      {Input: 0.40, CachedInput: 0.10, Output: 1.60},
	"gpt-4.1-nano":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"o1":                {Input: 15.00, CachedInput: 7.50, Output: 60.00},
	"o3":                {Input: 2.00, CachedInput: 0.50, Output: 8.00},
	"o3-mini":           {Input: 1.10, CachedInput: 0.55, Output: 4.40},
	"o4-mini":           {Input: 1.10, CachedInput: 0.275, Output: 4.40},
	"gpt-5":             {Input: 1.25, CachedInput: 0.125, Output: 10.00},
	"gpt-5-mini":        {Input: 0.25, CachedInput: 0.025, Output: 2.00},
	"gpt-5-nano":        {Input: 0.05, CachedInput: 0.005, Output: 0.40},
	"gpt-5.1":           {Input: 1.25, CachedInput: 0.125, Output: 10.00},
	// DeepSeek (one price for both since V3.2; a cache hit is the cached price)
	"deepseek-chat":     {Input: 0.28, CachedInput: 0.028, Output: 0.42},
	"deepseek-reasoner": {Input: 0.28, CachedInput: 0.028, Output: 0.42},
	// Alibaba Cloud Model Studio, international (qwen-plus without thinking)
	"qwen-turbo": {Input: 0.05, Output: 0.20},
	"qwen-plus":  {Input: 0.40, Output: 1.20},
	"qwen-max":   {Input: 1.60, Output: 6.40},
	"qwen3-max":  {Input: 1.20, Output: 6.00},
	// Google Gemini API (paid tier, text input)
	"gemini-2.0-flash":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"gemini-2.5-pro":        {Input: 1.25, CachedInput: 0.125, Output: 10.00},
	"gemini-2.5-flash":      {Input: 0.30, CachedInput: 0.03, Output: 2.50},
	"gemini-2.5-flash-lite": {Input: 0.10, CachedInput: 0.01, Output: 0.40},
	// Anthropic (the cached price is a cache read; a cache write is 1.25 times the
	// input price, for the default five-minute cache)
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, CacheWrite: 1.00, Output: 4.00},
	"claude-3-7-sonnet": {Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00},
	"claude-sonnet-4":   {Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00},
	"claude-sonnet-4-5": {Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00},
	"claude-haiku-4-5":  {Input: 1.00, CachedInput: 0.10, CacheWrite: 1.25, Output: 5.00},
	"claude-opus-4":     {Input: 15.00, CachedInput: 1.50, CacheWrite: 18.75, Output: 75.00},
	"claude-opus-4-1":   {Input: 15.00, CachedInput: 1.50, CacheWrite: 18.75, Output: 75.00},
	"claude-opus-4-5":   {Input: 5.00, CachedInput: 0.50, CacheWrite: 6.25, Output: 25.00},
}

// snapshotRe matches the date a provider appends to name a model's snapshot:
// gpt-4o-2024-08-06, qwen-plus-2025-07-28, claude-sonnet-4-20250514.
var snapshotRe = regexp.MustCompile(`-(?:\d{4}-\d{2}-\d{2}|\d{8})$`)

// tablePrice is the bundled price table's entry for a model name: the name itself,
// or the model a dated snapshot of it belongs to. Only whole names match, so
// gpt-4o-mini-2024-07-18 is gpt-4o-mini and never gpt-4o.
func tablePrice(name string) (Pricing, bool) {
	if p, ok := priceTable[name]; ok {
		return p, true
	}
	if loc := snapshotRe.FindStringIndex(name); loc != nil && loc[0] > 0 {
		p, ok := priceTable[name[:loc[0]]]
		return p, ok
	}
	return Pricing{}, false
}

// PriceOf is what m costs and where that price comes from: its model.pricing
// (source "model.pricing"), else the bundled table's entry for its name (source
// "price table 2026-11-30"). ok is false when neither knows; so is it for a model
// without a name, whose name the runtime only learns from the environment.
func PriceOf(m Model) (p Pricing, source string, ok bool) {
	if m.Pricing != nil {
		return *m.Pricing, "model.pricing", true
	}
	if p, ok := tablePrice(m.Name); ok {
		return p, "price table " + PriceTableDate, true
	}
	return Pricing{}, "", false
}

// ResolvePrices is the price of each model a run may call: the agent's, the
// judge's and the intent classifier's (router). judge.model and routing.model are
// merged over the agent's model as the assembly merges them, for the name and the
// price: an override without a name of its own is the agent's model and costs what
// it costs, unless it sets pricing. A nil price is unknown; judge is nil too when
// the spec has no judge.
func ResolvePrices(s *Spec) (agent, judge, router *Pricing) {
	price := func(m Model) *Pricing {
		if p, _, ok := PriceOf(m); ok {
			return &p
		}
		return nil
	}
	agent = price(s.Model)
	if s.Judge != nil {
		judge = price(pricedModel(s.Model, s.Judge.Model))
	}
	router = price(pricedModel(s.Model, s.Routing.Model))
	return agent, judge, router
}

// pricedModel is the name and pricing of base with over applied (nil: none). The
// price goes with the name: an override naming another model does not inherit
// the agent's model.pricing.
func pricedModel(base Model, over *Model) Model {
	m := Model{Name: base.Name, Pricing: base.Pricing}
	if over == nil {
		return m
	}
	if over.Name != "" && over.Name != base.Name {
		m.Name, m.Pricing = over.Name, nil
	}
	if over.Pricing != nil {
		m.Pricing = over.Pricing
	}
	return m
}
