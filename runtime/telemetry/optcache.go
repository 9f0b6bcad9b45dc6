package telemetry

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// measuring reports whether mp records anything at all: not for the no-op
// provider, so a run without telemetry does not build attribute sets.
func measuring(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return false
	}
	return true
}

// optKey identifies one combination of a measurement's attributes.
type optKey struct{ a, b, c, d string }

// optCache keeps the measurement options (attribute sets, sorted and hashed once)
// of the attribute combinations seen, so recording a measurement allocates nothing
// after the first time. It holds at most maxOpts combinations; past that it
// builds them each time.
type optCache struct {
	mu sync.RWMutex
	m  map[optKey]metric.MeasurementOption
}

const maxOpts = 4096

func (c *optCache) get(k optKey, build func() []attribute.KeyValue) metric.MeasurementOption {
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	o = metric.WithAttributeSet(attribute.NewSet(build()...))
	c.mu.Lock()
	if c.m == nil {
		c.m = map[optKey]metric.MeasurementOption{}
	}
	if len(c.m) < maxOpts {
		c.m[k] = o
	}
	c.mu.Unlock()
	return o
}
