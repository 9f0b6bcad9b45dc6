package telemetry

import "go.opentelemetry.io/otel/attribute"

// The names below follow the OpenTelemetry semantic conventions for generative AI,
// version 1.37.0 (status: development), as the Go module's semconv/v1.37.0 package
// spelled them before semconv v1.42.0 dropped them. The few names marked "later"
// were added by the conventions after 1.37.0 (1.38.0–1.40.0) and are used with that
// version's meaning. The conventions may still change: this file is the one place to
// follow them.
const (
	// SemconvVersion is the version of the GenAI conventions these names follow.
	SemconvVersion = "1.37.0"

	AttrOperationName  = attribute.Key("gen_ai.operation.name")
	AttrProviderName   = attribute.Key("gen_ai.provider.name")
	AttrRequestModel   = attribute.Key("gen_ai.request.model")
	AttrResponseModel  = attribute.Key("gen_ai.response.model")
	AttrInputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	AttrOutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	AttrFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	AttrConversationID = attribute.Key("gen_ai.conversation.id")
	AttrAgentName      = attribute.Key("gen_ai.agent.name")
	AttrToolName       = attribute.Key("gen_ai.tool.name")
	AttrToolCallID     = attribute.Key("gen_ai.tool.call.id")
	AttrToolType       = attribute.Key("gen_ai.tool.type")
	AttrMaxTokens      = attribute.Key("gen_ai.request.max_tokens")
	AttrTemperature    = attribute.Key("gen_ai.request.temperature")
	AttrOutputType     = attribute.Key("gen_ai.output.type")
	AttrDataSourceID   = attribute.Key("gen_ai.data_source.id")
	AttrTokenType      = attribute.Key("gen_ai.token.type")
	AttrErrorType      = attribute.Key("error.type")

	// Content: recorded only when Options.RecordContent is set.
	AttrInputMessages      = attribute.Key("gen_ai.input.messages")
	AttrOutputMessages     = attribute.Key("gen_ai.output.messages")
	AttrSystemInstructions = attribute.Key("gen_ai.system_instructions")
	AttrToolCallArguments  = attribute.Key("gen_ai.tool.call.arguments")               // later (1.38.0)
	AttrToolCallResult     = attribute.Key("gen_ai.tool.call.result")                  // later (1.38.0)
	AttrRetrievalQuery     = attribute.Key("gen_ai.retrieval.query.text")              // later (1.40.0)
	AttrCacheReadTokens    = attribute.Key("gen_ai.usage.cache_read.input_tokens")     // later (1.40.0)
	AttrCacheWriteTokens   = attribute.Key("gen_ai.usage.cache_creation.input_tokens") // later (1.40.0)
	AttrEmbeddingsDims     = attribute.Key("gen_ai.embeddings.dimension.count")        // later (1.39.0)

	// Values of gen_ai.operation.name.
	OpInvokeAgent = "invoke_agent"
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
	OpEmbeddings  = "embeddings"
	OpRetrieval   = "retrieval" // later (1.40.0)

	// Values of gen_ai.token.type.
	TokenInput  = "input"
	TokenOutput = "output"

	// Values of gen_ai.output.type.
	OutputText = "text"
	OutputJSON = "json"

	// Value of gen_ai.tool.type for the tools agentrun runs itself.
	ToolTypeFunction = "function"

	// Metric names and units.
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricOperationDuration = "gen_ai.client.operation.duration"
	UnitTokens              = "{token}"
	UnitSeconds             = "s"
)

// Bucket boundaries the conventions advise for the two GenAI histograms.
var (
	TokenUsageBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	DurationBuckets   = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// agentrun's own names, outside the conventions.
const (
	AttrPurpose     = attribute.Key("agentrun.model.purpose") // agent | judge | classifier | extractor
	AttrStopReason  = attribute.Key("agentrun.stop_reason")
	AttrCostUSD     = attribute.Key("agentrun.cost_usd")
	AttrIntent      = attribute.Key("agentrun.intent")
	AttrRoutedBy    = attribute.Key("agentrun.routed_by")
	AttrTurns       = attribute.Key("agentrun.turns")
	AttrToolRounds  = attribute.Key("agentrun.tool_rounds")
	AttrToolKind    = attribute.Key("agentrun.tool.kind") // the registry key: http, command, mcp, builtin:<name>
	AttrToolOutcome = attribute.Key("agentrun.tool.outcome")
	AttrRefusal     = attribute.Key("agentrun.tool.refusal")
	AttrGuard       = attribute.Key("agentrun.guard")
	AttrVerdictPass = attribute.Key("agentrun.verdict.passed")
	AttrVerdictHow  = attribute.Key("agentrun.verdict.how")
	AttrMissing     = attribute.Key("agentrun.verdict.missing") // content: opt-in only
	AttrFilter      = attribute.Key("agentrun.filter.name")
	AttrFilterStage = attribute.Key("agentrun.filter.stage")
	AttrFilterAct   = attribute.Key("agentrun.filter.action")
	AttrCache       = attribute.Key("agentrun.cache.outcome")
	AttrCacheKind   = attribute.Key("agentrun.cache.entry_kind")
	AttrCacheScore  = attribute.Key("agentrun.cache.score")
	AttrCollection  = attribute.Key("agentrun.knowledge.collection")
	AttrTopK        = attribute.Key("agentrun.retrieval.top_k")
	AttrMinScore    = attribute.Key("agentrun.retrieval.min_score")
	AttrPassages    = attribute.Key("agentrun.retrieval.passages")
	AttrInputs      = attribute.Key("agentrun.embeddings.inputs")
	AttrDetail      = attribute.Key("agentrun.stop_detail") // content: opt-in only
	// A fallback chain's call (model.fallback): the configured model that
	// answered, its provider, and the chain's models that failed before it.
	AttrAnswered         = attribute.Key("agentrun.model.answered")
	AttrAnsweredProvider = attribute.Key("agentrun.model.answered_provider")
	AttrFallbackFrom     = attribute.Key("agentrun.model.fallback_from")
	AttrFallbackTo       = attribute.Key("agentrun.model.fallback_to")
	// A remote agent's task (agents[].a2a): the host of its URL (never its
	// credentials), the task's and its context's ids there, and its state.
	AttrRemoteHost    = attribute.Key("agentrun.remote_agent.host")
	AttrRemoteTask    = attribute.Key("agentrun.remote_agent.task_id")
	AttrRemoteContext = attribute.Key("agentrun.remote_agent.context_id")
	AttrRemoteState   = attribute.Key("agentrun.remote_agent.state")

	// Values of agentrun.model.purpose.
	PurposeAgent      = "agent"
	PurposeJudge      = "judge"
	PurposeClassifier = "classifier"
	PurposeExtractor  = "extractor" // the facts extraction of long-term memory

	// Span event names.
	EventStop        = "agentrun.stop"
	EventGuard       = "agentrun.guard"
	EventVerdict     = "agentrun.verdict"
	EventFilter      = "agentrun.filter"
	EventCache       = "agentrun.cache"
	EventRetrieve    = "agentrun.retrieve"
	EventIntent      = "agentrun.intent"
	EventToolRefused = "agentrun.tool_refused"
	EventRemoteAgent = "agentrun.remote_agent"

	// agentrun's metrics.
	MetricToolCalls = "agentrun.tool.calls" // counter {call}: agentrun.tool.outcome, gen_ai.tool.name
	MetricRuns      = "agentrun.runs"       // counter {run}: agentrun.stop_reason, gen_ai.agent.name
	MetricCost      = "agentrun.cost"       // counter USD: gen_ai.agent.name
	// counter {call}: agentrun.model.fallback_from (one failed model), agentrun.model.fallback_to, agentrun.model.purpose
	MetricFallbacks = "agentrun.model.fallbacks"
)
