package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME nor
// OTEL_RESOURCE_ATTRIBUTES names the service.
const DefaultServiceName = "agentrun"

// DefaultShutdownTimeout bounds Shutdown when its context has no earlier deadline.
const DefaultShutdownTimeout = 5 * time.Second

// Telemetry holds the providers Setup built: SDK providers exporting by OTLP/HTTP
// when the environment asks for it, no-op ones otherwise.
type Telemetry struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	prop       propagation.TextMapPropagator
	sdkTP      *sdktrace.TracerProvider // nil when traces are off
	sdkMP      *sdkmetric.MeterProvider // nil when metrics are off
	traces     bool
	metrics    bool
	errors     atomic.Int64
	logOnce    sync.Once
	log        *slog.Logger
	shutdownTO time.Duration
}

// SetupOption adjusts Setup.
type SetupOption func(*setupConfig)

type setupConfig struct {
	readers []sdkmetric.Reader
	log     *slog.Logger
}

// WithMetricReader adds a metric reader (serve's Prometheus exporter): the meter
// provider is then an SDK one even when OTLP metrics are off.
func WithMetricReader(r sdkmetric.Reader) SetupOption {
	return func(c *setupConfig) { c.readers = append(c.readers, r) }
}

// WithLogger is where export errors go (through the handler Install sets): the
// first at warning level, the rest at debug level. The default is slog.Default().
func WithLogger(l *slog.Logger) SetupOption {
	return func(c *setupConfig) { c.log = l }
}

// Setup builds the providers from the standard OTEL_* variables, read through
// lookupEnv:
//
//   - traces are exported when OTEL_TRACES_EXPORTER is otlp, or it is unset and
//     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
//     metrics likewise with OTEL_METRICS_EXPORTER and
//     OTEL_EXPORTER_OTLP_METRICS_ENDPOINT. "none", or OTEL_SDK_DISABLED=true,
//     turns them off. Off, the provider is a no-op one and the runtime pays
//     next to nothing.
//   - the endpoint (generic ones get /v1/traces or /v1/metrics appended), headers
//     and timeout are read through lookupEnv and passed to the exporters
//     explicitly; OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf (or unset).
//     What else the SDK reads (certificates, compression, OTEL_BSP_*, the
//     sampler) it reads from the process environment itself.
//   - the resource: service.name from OTEL_SERVICE_NAME, else
//     OTEL_RESOURCE_ATTRIBUTES, else "agentrun", plus OTEL_RESOURCE_ATTRIBUTES.
//   - the propagator: OTEL_PROPAGATORS (tracecontext, baggage, none), by default
//     W3C tracecontext and baggage.
//
// Spans go through a batch processor and metrics through a periodic reader, so a
// collector that is slow or down never holds up a run; their export errors reach
// only otel's error handler (see Install). Setup sets no global: Install does.
func Setup(ctx context.Context, lookupEnv func(string) (string, bool), opts ...SetupOption) (*Telemetry, error) {
	var cfg setupConfig
	for _, o := range opts {
		o(&cfg)
	}
	env := envReader(lookupEnv)
	t := &Telemetry{log: cfg.log, shutdownTO: DefaultShutdownTimeout}
	if t.log == nil {
		t.log = slog.Default()
	}
	if err := t.readSignals(env); err != nil {
		return nil, err
	}
	t.tp, t.mp = tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()
	if !t.traces && !t.metrics && len(cfg.readers) == 0 {
		return t, nil
	}
	res, err := resourceFrom(ctx, env("OTEL_SERVICE_NAME"), env("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return nil, err
	}
	if t.traces {
		if t.sdkTP, err = tracerProvider(ctx, env, res); err != nil {
			return nil, err
		}
		t.tp = t.sdkTP
	}
	if t.metrics || len(cfg.readers) > 0 {
		if t.sdkMP, err = t.meterProvider(ctx, env, res, cfg.readers); err != nil {
			return nil, err
		}
		t.mp = t.sdkMP
	}
	return t, nil
}

// envReader reads a variable through lookupEnv, trimmed: "" when it is unset or
// there is no lookupEnv.
func envReader(lookupEnv func(string) (string, bool)) func(string) string {
	return func(k string) string {
		if lookupEnv == nil {
			return ""
		}
		v, _ := lookupEnv(k)
		return strings.TrimSpace(v)
	}
}

// readSignals reads the propagator and whether traces and metrics are exported.
func (t *Telemetry) readSignals(env func(string) string) error {
	var err error
	if t.prop, err = propagatorFrom(env("OTEL_PROPAGATORS")); err != nil {
		return err
	}
	disabled := strings.EqualFold(env("OTEL_SDK_DISABLED"), "true")
	generic := env("OTEL_EXPORTER_OTLP_ENDPOINT")
	if t.traces, err = exporterOn("OTEL_TRACES_EXPORTER", env("OTEL_TRACES_EXPORTER"), generic != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""); err != nil {
		return err
	}
	if t.metrics, err = exporterOn("OTEL_METRICS_EXPORTER", env("OTEL_METRICS_EXPORTER"), generic != "" || env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""); err != nil {
		return err
	}
	if disabled {
		t.traces, t.metrics = false, false
	}
	return nil
}

// tracerProvider is the SDK tracer provider exporting spans by OTLP/HTTP through
// a batch processor.
func tracerProvider(ctx context.Context, env func(string) string, res *resource.Resource) (*sdktrace.TracerProvider, error) {
	c, err := signalConfig(env, "TRACES", "/v1/traces")
	if err != nil {
		return nil, err
	}
	topts := []otlptracehttp.Option{}
	if c.endpoint != "" {
		topts = append(topts, otlptracehttp.WithEndpointURL(c.endpoint))
	}
	if c.headers != nil {
		topts = append(topts, otlptracehttp.WithHeaders(c.headers))
	}
	if c.timeout > 0 {
		topts = append(topts, otlptracehttp.WithTimeout(c.timeout))
	}
	exp, err := otlptracehttp.New(ctx, topts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp)), nil
}

// meterProvider is the SDK meter provider with the readers given and, when
// metrics are exported, a periodic reader exporting by OTLP/HTTP.
func (t *Telemetry) meterProvider(ctx context.Context, env func(string) string, res *resource.Resource, readers []sdkmetric.Reader) (*sdkmetric.MeterProvider, error) {
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	for _, r := range readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	if t.metrics {
		r, err := t.otlpMetricReader(ctx, env)
		if err != nil {
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	return sdkmetric.NewMeterProvider(mopts...), nil
}

// otlpMetricReader is the periodic reader exporting metrics by OTLP/HTTP. When
// its exporter cannot be made, the tracer provider already built is shut down.
func (t *Telemetry) otlpMetricReader(ctx context.Context, env func(string) string) (sdkmetric.Reader, error) {
	c, err := signalConfig(env, "METRICS", "/v1/metrics")
	if err != nil {
		return nil, err
	}
	eopts := []otlpmetrichttp.Option{}
	if c.endpoint != "" {
		eopts = append(eopts, otlpmetrichttp.WithEndpointURL(c.endpoint))
	}
	if c.headers != nil {
		eopts = append(eopts, otlpmetrichttp.WithHeaders(c.headers))
	}
	if c.timeout > 0 {
		eopts = append(eopts, otlpmetrichttp.WithTimeout(c.timeout))
	}
	exp, err := otlpmetrichttp.New(ctx, eopts...)
	if err != nil {
		if t.sdkTP != nil {
			_ = t.sdkTP.Shutdown(ctx)
		}
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	var ropts []sdkmetric.PeriodicReaderOption
	if d, err := millis(env, "OTEL_METRIC_EXPORT_INTERVAL"); err != nil {
		return nil, err
	} else if d > 0 {
		ropts = append(ropts, sdkmetric.WithInterval(d))
	}
	if d, err := millis(env, "OTEL_METRIC_EXPORT_TIMEOUT"); err != nil {
		return nil, err
	} else if d > 0 {
		ropts = append(ropts, sdkmetric.WithTimeout(d))
	}
	return sdkmetric.NewPeriodicReader(exp, ropts...), nil
}

// exporterOn reads OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER: otlp is on,
// none is off, unset is on when an endpoint is set.
func exporterOn(name, v string, endpoint bool) (bool, error) {
	if v == "" {
		return endpoint, nil
	}
	on := false
	for _, e := range strings.Split(v, ",") {
		switch strings.TrimSpace(e) {
		case "otlp":
			on = true
		case "none", "":
		default:
			return false, fmt.Errorf("%s=%s: only otlp (over HTTP) and none are supported", name, v)
		}
	}
	return on, nil
}

type signal struct {
	endpoint string
	headers  map[string]string
	timeout  time.Duration
}

// signalConfig reads one signal's endpoint, headers, timeout and protocol, the
// signal's own variable first.
func signalConfig(env func(string) string, sig, path string) (signal, error) {
	var c signal
	proto := env("OTEL_EXPORTER_OTLP_" + sig + "_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return c, fmt.Errorf("OTLP protocol %q: only http/protobuf is supported", proto)
	}
	if e := env("OTEL_EXPORTER_OTLP_" + sig + "_ENDPOINT"); e != "" {
		c.endpoint = e
	} else if e := env("OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		c.endpoint = strings.TrimSuffix(e, "/") + path
	}
	if c.endpoint != "" {
		if u, err := url.Parse(c.endpoint); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return c, fmt.Errorf("the OTLP endpoint is not an http:// or https:// URL") // it may carry a token
		}
	}
	h := env("OTEL_EXPORTER_OTLP_" + sig + "_HEADERS")
	if h == "" {
		h = env("OTEL_EXPORTER_OTLP_HEADERS")
	}
	if h != "" {
		kv, err := keyValues(h)
		if err != nil {
			return c, fmt.Errorf("OTLP headers: %w", err)
		}
		c.headers = kv
	}
	var err error
	if c.timeout, err = millis(env, "OTEL_EXPORTER_OTLP_"+sig+"_TIMEOUT"); err != nil {
		return c, err
	}
	if c.timeout == 0 {
		c.timeout, err = millis(env, "OTEL_EXPORTER_OTLP_TIMEOUT")
	}
	return c, err
}

// millis reads a variable in milliseconds; 0 when unset.
func millis(env func(string) string, name string) (time.Duration, error) {
	v := env(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%s: want a positive number of milliseconds", name, v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// keyValues parses the W3C-baggage-like k=v,k2=v2 lists of OTEL_RESOURCE_ATTRIBUTES
// and the OTLP headers; values are percent-decoded.
func keyValues(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("entry %d is not key=value", i+1) // never the value: it may be a key
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("entry %d (%s): the value is not URL-encoded", i+1, k)
		}
		out[k] = dv
	}
	return out, nil
}

func resourceFrom(ctx context.Context, service, attrs string) (*resource.Resource, error) {
	kv, err := keyValues(attrs)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	if service != "" {
		kv["service.name"] = service
	} else if kv["service.name"] == "" {
		kv["service.name"] = DefaultServiceName
	}
	list := make([]attribute.KeyValue, 0, len(kv))
	for k, v := range kv {
		list = append(list, attribute.String(k, v))
	}
	return resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(list...))
}

func propagatorFrom(v string) (propagation.TextMapPropagator, error) {
	if v == "" {
		return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), nil
	}
	var list []propagation.TextMapPropagator
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "tracecontext":
			list = append(list, propagation.TraceContext{})
		case "baggage":
			list = append(list, propagation.Baggage{})
		case "none", "":
		default:
			return nil, fmt.Errorf("OTEL_PROPAGATORS=%s: only tracecontext, baggage and none are supported", v)
		}
	}
	return propagation.NewCompositeTextMapPropagator(list...), nil
}

// TracerProvider is the provider to trace with: an SDK one exporting by OTLP, or a
// no-op one.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// MeterProvider is the provider to measure with: an SDK one, or a no-op one.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.mp }

// Propagator is the text-map propagator: W3C tracecontext and baggage by default.
func (t *Telemetry) Propagator() propagation.TextMapPropagator { return t.prop }

// Enabled reports whether anything is exported or read: when not, callers may
// leave the wrappers out altogether.
func (t *Telemetry) Enabled() bool { return t.sdkTP != nil || t.sdkMP != nil }

// TracesEnabled reports whether spans are exported.
func (t *Telemetry) TracesEnabled() bool { return t.sdkTP != nil }

// Install makes t's providers and propagator otel's global ones and sends otel's
// errors (failed exports) to t's quiet handler: counted, the first logged at
// warning level, the rest at debug level.
func (t *Telemetry) Install() {
	otel.SetErrorHandler(t)
	otel.SetTracerProvider(t.tp)
	otel.SetMeterProvider(t.mp)
	otel.SetTextMapPropagator(t.prop)
}

// Handle is otel's error handler (see Install).
func (t *Telemetry) Handle(err error) {
	t.errors.Add(1)
	first := false
	t.logOnce.Do(func() { first = true })
	if first {
		t.log.Warn("telemetry: "+err.Error(), "note", "further telemetry errors are logged at debug level")
		return
	}
	t.log.Debug("telemetry: " + err.Error())
}

// Errors counts the errors Handle has seen.
func (t *Telemetry) Errors() int64 { return t.errors.Load() }

// Shutdown flushes what is buffered and stops the exporters, within ctx and at most
// DefaultShutdownTimeout: a collector that is down costs the caller that long at
// worst. It may be called more than once.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.shutdownTO)
	defer cancel()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	shut := func(f func(context.Context) error) {
		defer wg.Done()
		if err := f(ctx); err != nil && !errors.Is(err, sdkmetric.ErrReaderShutdown) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	if t.sdkTP != nil {
		wg.Add(1)
		go shut(t.sdkTP.Shutdown)
	}
	if t.sdkMP != nil {
		wg.Add(1)
		go shut(t.sdkMP.Shutdown)
	}
	wg.Wait()
	return errors.Join(errs...)
}

var otelHandle = otel.Handle
