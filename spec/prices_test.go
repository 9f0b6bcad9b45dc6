package spec

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestPriceOf(t *testing.T) {
	own := &Pricing{Input: 1, CachedInput: 0.5, Output: 2}
	table := "price table " + PriceTableDate
	tests := []struct {
		name   string
		model  Model
		want   Pricing
		source string
		ok     bool
	}{
		{"exact", Model{Name: "gpt-4o"}, Pricing{Input: 2.5, CachedInput: 1.25, Output: 10}, table, true},
		{"mini is not gpt-4o", Model{Name: "gpt-4o-mini"}, Pricing{Input: 0.15, CachedInput: 0.075, Output: 0.6}, table, true},
		{"dated snapshot", Model{Name: "gpt-4o-2024-08-06"}, Pricing{Input: 2.5, CachedInput: 1.25, Output: 10}, table, true},
		{"dated mini snapshot", Model{Name: "gpt-4o-mini-2024-07-18"}, Pricing{Input: 0.15, CachedInput: 0.075, Output: 0.6}, table, true},
		{"snapshot priced apart", Model{Name: "gpt-4o-2024-05-13"}, Pricing{Input: 5, Output: 15}, table, true},
		{"compact date", Model{Name: "claude-sonnet-4-20250514"}, Pricing{Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}, table, true},
		{"dated qwen", Model{Name: "qwen-plus-2025-07-28"}, Pricing{Input: 0.4, Output: 1.2}, table, true},
		{"deepseek", Model{Name: "deepseek-reasoner"}, Pricing{Input: 0.28, CachedInput: 0.028, Output: 0.42}, table, true},
		{"unknown", Model{Name: "llama3"}, Pricing{}, "", false},
		{"a prefix is not a match", Model{Name: "gpt-4o-audio-preview"}, Pricing{}, "", false},
		{"a router's prefix is not a match", Model{Name: "openai/gpt-4o"}, Pricing{}, "", false},
		{"a date alone is no name", Model{Name: "-2024-08-06"}, Pricing{}, "", false},
		{"no name", Model{}, Pricing{}, "", false},
		{"override", Model{Name: "gpt-4o", Pricing: own}, *own, "model.pricing", true},
		{"override of an unknown model", Model{Name: "llama3", Pricing: &Pricing{}}, Pricing{}, "model.pricing", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, source, ok := PriceOf(tt.model)
			if got != tt.want || source != tt.source || ok != tt.ok {
				t.Errorf("PriceOf(%+v) = %+v, %q, %v; want %+v, %q, %v", tt.model, got, source, ok, tt.want, tt.source, tt.ok)
			}
		})
	}
}

func TestResolvePrices(t *testing.T) {
	agentPrice := &Pricing{Input: 1, Output: 3}
	judgePrice := &Pricing{Input: 0.1, Output: 0.2}
	mini := Pricing{Input: 0.15, CachedInput: 0.075, Output: 0.6}
	gpt4o := Pricing{Input: 2.5, CachedInput: 1.25, Output: 10}
	tests := []struct {
		name                string
		spec                Spec
		agent, judge, route *Pricing
	}{
		{"table, no judge", Spec{Model: Model{Name: "gpt-4o"}}, &gpt4o, nil, &gpt4o},
		{"judge without a model is the agent's",
			Spec{Model: Model{Name: "gpt-4o"}, Judge: &Judge{}}, &gpt4o, &gpt4o, &gpt4o},
		{"judge with its own name",
			Spec{Model: Model{Name: "gpt-4o"}, Judge: &Judge{Model: &Model{Name: "gpt-4o-mini"}}}, &gpt4o, &mini, &gpt4o},
		{"judge without a name inherits the agent's pricing",
			Spec{Model: Model{Name: "my-model", Pricing: agentPrice}, Judge: &Judge{Model: &Model{MaxTokens: 200}}}, agentPrice, agentPrice, agentPrice},
		{"judge without a name, with pricing",
			Spec{Model: Model{Name: "my-model", Pricing: agentPrice}, Judge: &Judge{Model: &Model{Pricing: judgePrice}}}, agentPrice, judgePrice, agentPrice},
		{"judge naming another model does not inherit the agent's pricing",
			Spec{Model: Model{Name: "my-model", Pricing: agentPrice}, Judge: &Judge{Model: &Model{Name: "my-judge"}}}, agentPrice, nil, agentPrice},
		{"judge naming the agent's model inherits its pricing",
			Spec{Model: Model{Name: "my-model", Pricing: agentPrice}, Judge: &Judge{Model: &Model{Name: "my-model"}}}, agentPrice, agentPrice, agentPrice},
		{"judge with its own name and pricing",
			Spec{Model: Model{Name: "gpt-4o"}, Judge: &Judge{Model: &Model{Name: "my-judge", Pricing: judgePrice}}}, &gpt4o, judgePrice, &gpt4o},
		{"router with its own name",
			Spec{Model: Model{Name: "llama3"}, Routing: Routing{Model: &Model{Name: "gpt-4o-mini-2024-07-18"}}}, nil, nil, &mini},
		{"router without a name, unknown agent model",
			Spec{Model: Model{Name: "llama3"}, Routing: Routing{Model: &Model{Provider: ProviderOpenAI}}}, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, judge, route := ResolvePrices(&tt.spec)
			for _, c := range []struct {
				role      string
				got, want *Pricing
			}{{"agent", agent, tt.agent}, {"judge", judge, tt.judge}, {"router", route, tt.route}} {
				if (c.got == nil) != (c.want == nil) || c.got != nil && *c.got != *c.want {
					t.Errorf("%s = %v, want %v", c.role, show(c.got), show(c.want))
				}
			}
		})
	}
}

func show(p *Pricing) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%+v", *p)
}

// The table's entries are plausible, and an entry named like a snapshot is one of a
// model the table knows (it would otherwise be found by the suffix rule anyway).
func TestPriceTableEntries(t *testing.T) {
	for name, p := range priceTable {
		if p.Input <= 0 || p.Output <= 0 || p.CachedInput > p.Input || p.CachedInput < 0 || p.CacheWrite != 0 && p.CacheWrite < p.Input {
			t.Errorf("%s: implausible price %+v", name, p)
		}
		if loc := snapshotRe.FindStringIndex(name); loc != nil {
			if _, ok := priceTable[name[:loc[0]]]; !ok {
				t.Errorf("%s: a snapshot of a model the table does not know", name)
			}
		}
	}
}

// docs/spec.md lists the price table: the same names and prices.
func TestDocsPriceTable(t *testing.T) {
	section := docSection(t, readSpecDoc(t), "#### Price table")
	if !strings.Contains(strings.Join(section, "\n"), "**"+PriceTableDate+"**") {
		t.Errorf("the docs' price table does not give its date %s", PriceTableDate)
	}
	listed := 0
	for _, l := range section {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		listed++
		row := strings.Split(strings.Trim(l, "| "), " | ")
		name := strings.Trim(row[0], "`")
		want, ok := priceTable[name]
		if !ok {
			t.Errorf("the docs list %s, the table does not", name)
			continue
		}
		num := func(cell string, dflt float64) float64 {
			if cell == "—" {
				return dflt
			}
			v, err := strconv.ParseFloat(cell, 64)
			if err != nil {
				t.Errorf("%s: %q is not a price", name, cell)
			}
			return v
		}
		if len(row) != 5 {
			t.Errorf("%s: the row has %d cells, want 5", name, len(row))
			continue
		}
		if got := (Pricing{Input: num(row[1], 0), CachedInput: num(row[2], 0), CacheWrite: num(row[3], 0), Output: num(row[4], 0)}); got != want {
			t.Errorf("%s: the docs say %+v, the table %+v", name, got, want)
		}
	}
	if listed != len(priceTable) {
		t.Errorf("the docs list %d models, the table has %d", listed, len(priceTable))
	}
}

func TestPricingCost(t *testing.T) {
	p, _, _ := PriceOf(Model{Name: "gpt-4o"})
	// 1M prompt tokens of which 400k cached, 100k output: 0.6×2.5 + 0.4×1.25 + 0.1×10.
	if got, want := p.Cost(1_000_000, 400_000, 0, 100_000), 3.0; fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", want) {
		t.Errorf("cost = %v, want %v", got, want)
	}
	// Anthropic: 1M prompt tokens of which 300k read from the cache and 200k
	// written to it, 100k output: 0.5×3 + 0.3×0.3 + 0.2×3.75 + 0.1×15.
	p, _, _ = PriceOf(Model{Name: "claude-sonnet-4-5-20250929"})
	if got, want := p.Cost(1_000_000, 300_000, 200_000, 100_000), 3.84; fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", want) {
		t.Errorf("claude cost = %v, want %v", got, want)
	}
	// Without a cache_write price, writes cost the input price.
	if got, want := (Pricing{Input: 2, Output: 8}).Cost(1_000_000, 0, 500_000, 0), 2.0; got != want {
		t.Errorf("default cache write cost = %v, want %v", got, want)
	}
}
