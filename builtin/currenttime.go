package builtin

import (
	"context"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// currentTime tells the model the date and time, which it cannot know by itself.
type currentTime struct {
	loc *time.Location
	now func() time.Time // time.Now; tests set a fixed clock
}

type currentTimeConfig struct {
	Timezone string `with:"timezone"`
}

func newCurrentTime(t *spec.Tool, _ string) (tool.Tool, error) {
	cfg := currentTimeConfig{Timezone: "UTC"}
	if err := decodeWith("current_time", t.With, &cfg); err != nil {
		return nil, err
	}
	loc, err := loadLocation(cfg.Timezone)
	if err != nil {
		return nil, fmt.Errorf("with.timezone: %v", err)
	}
	return &currentTime{loc: loc, now: time.Now}, nil
}

// loadLocation accepts IANA names only. time.LoadLocation also takes "Local", which
// would make the answer depend on the machine agentrun happens to run on.
func loadLocation(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("%q is not an IANA time zone name; use one like UTC or Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q; use an IANA name like UTC, Europe/Paris or America/New_York", name)
	}
	return loc, nil
}

func (c *currentTime) Describe() tool.Info {
	return tool.Info{
		Description: fmt.Sprintf("Get the current date and time (RFC 3339) and the weekday. "+
			"Without a timezone it answers in %s.", c.loc),
		Parameters: objectSchema(map[string]any{
			"timezone": map[string]any{
				"type":        "string",
				"description": "IANA time zone name, like Europe/Paris. Optional.",
				"examples":    []any{c.loc.String()},
			},
		}),
	}
}

func (c *currentTime) Call(_ context.Context, in tool.Input) (string, error) {
	loc := c.loc
	name, ok, err := stringArg(in.Args, "timezone")
	if err != nil {
		return "", err
	}
	if ok && name != "" {
		if loc, err = loadLocation(name); err != nil {
			return "", err
		}
	}
	now := c.now().In(loc).Truncate(time.Second)
	return fmt.Sprintf("%s (%s, %s)", now.Format(time.RFC3339), now.Weekday(), loc), nil
}
