// serve_limits.go owns every limit of "acpguard serve" (DESIGN.md §6), each
// with its reason, and the names under which the ones that end something are
// logged and counted: the operator's limits (serveLimits) with their
// defaults and ranges too, which config.go parses from the flags.
package main

import "time"

// Limits of the host API.
const (
	// Host bodies get the provider request's bound (DESIGN.md §6).
	maxHostBody = 1 << 20
	// Content blocks of one prompt (DESIGN.md §6).
	maxPromptBlocks = 256
	// A full daemon frees a session when a host deletes one or one idles
	// out; a host asked to come back in seconds does not hammer it.
	sessionLimitRetryAfter = "5"
	// In-flight host requests get this long to finish at shutdown.
	httpShutdownGrace = time.Second
	// The reaper looks for idle sessions a few times per idle timeout, so a
	// session outlives its timeout by a fraction of it at most.
	idleChecksPerTimeout = 4
	maxIdleCheckInterval = time.Minute
)

// Limits of the private ACP channel.
const (
	// Every read from another process is bounded; updates carry tool output.
	maxChildLine = 8 << 20
	// session/new of a healthy child takes milliseconds.
	childCallTimeout = 15 * time.Second
	// Shutdown ends within a few seconds (DESIGN.md §9): a child gets this
	// long to end its tools after SIGTERM.
	childStopGrace = 2 * time.Second
)

// Limits of the event streams.
const (
	// A slow subscriber is dropped; it never stalls the child. A prompt's
	// echo alone is up to maxPromptBlocks events, published at once before
	// a host on a busy machine reads any: the queue holds four such bursts,
	// so only a host that stopped reading is dropped. The bytes bound below
	// still caps what waits.
	subscriberQueue = 4 * maxPromptBlocks
	// A subscriber's queue is bounded in bytes too. A healthy host's handler
	// takes its whole queue each time it writes, so only a host that stopped
	// reading lets more than one child line's worth of events wait. An event
	// larger than this still enters an empty queue.
	subscriberQueueBytes = maxChildLine
	// A replay is taken from the ring in batches of at most this many bytes
	// (at least one event), so a stream replaying a full ring holds no more
	// than one batch outside the ring.
	replayBatchBytes = subscriberQueueBytes
	// The ring is also bounded in bytes: a tool update may be large, and
	// --event-ring-size events of it must not hold gigabytes per session.
	// The oldest events leave the ring first; the newest always stays.
	eventRingBytes = 64 << 20
	// A comment line this often keeps an idle stream alive.
	heartbeatInterval = 15 * time.Second
	// Every write to an event stream, and every flush, must end within this
	// long. A host on loopback takes a frame at once; one that has not
	// taken it in 30 s has stopped reading, and a heartbeat at least every
	// 15 s makes even an idle stream notice. The host reconnects with
	// Last-Event-ID.
	streamWriteTimeout = 30 * time.Second
	// A dropped subscriber's handler offers the host the stream_dropped
	// notice for at most this long; its queue is already released, and a
	// write that was blocked when the drop came has already failed.
	dropNoticeTimeout = time.Second
	// The stream starts with this retry, as Qwen Code's does (DESIGN.md §7).
	sseRetryMillis = 3000
	// An encoder buffer that grew past this for one huge update leaves the
	// pool, so it does not outlive the update.
	maxPooledEnvelope = 64 << 10
)

// --max-event-memory: the bytes of events that every session's ring and
// every subscriber's queue may hold together.
const (
	// Four full rings (eventRingBytes each).
	defaultMaxEventMemory = 256 << 20
	// Below a few events no replay is possible; above a terabyte the bound
	// is no bound on this kind of host.
	minMaxEventMemory = 1 << 20
	maxMaxEventMemory = 1 << 40
	// Over the budget, events are evicted until a sixteenth of it is free:
	// a full budget then costs one eviction, and one log line, per 16 MiB
	// published (at the default) rather than one per event.
	eventMemorySlack = 16
)

// Bounds of the model calls serve makes for one prompt: over either, the
// call fails and the child ends the turn with an error.
const (
	// The prompt loop makes one model call per turn, so a prompt needs at
	// most the settings' model.maxSessionTurns calls; no settings file allows more
	// than this.
	maxModelCallsPerPrompt = maxMaxTurns
	// Request and reply bytes together. A reply is at most openAIMaxReply
	// and a request at most the channel's line; a prompt of many turns
	// resends its growing history each time. The bound keeps a child that
	// loops, or a process posing as it, from spending the operator's model
	// budget without end.
	maxModelBytesPerPrompt = 256 << 20
	// modelChunkSize is the most reply bytes one notification carries
	// (before base64), well under the child's line bound.
	modelChunkSize = 32 << 10
	// maxModelStreamID bounds the child's name for one call's reply.
	maxModelStreamID = 64
)

// Tool executions are labelled with the child's _meta.toolName, which a
// model and an MCP server choose: only canonical-looking names become a
// label, and only so many of them.
const (
	maxToolLabelLen = 128
	maxToolSeries   = 256
)

// Names under which limits that end something, rather than refuse a
// request, are logged and counted (limit_hits_total).
const (
	// A slow subscriber was dropped; the others and the child go on.
	limitSubscriberDropped = "subscriber_dropped"
	// A prompt ran into its deadline and was cancelled as a host cancels it.
	limitPromptDeadline = "prompt_deadline_exceeded"
	// A permission request timed out: answered cancelled, the call does not run.
	limitPermissionTimeout = "permission_timeout"
	// An idle session was closed with session_closed.
	limitSessionIdle = "session_idle_timeout"
	// The event memory budget evicted events from a ring or dropped a stream.
	limitEventMemory = "event_memory"
	// A prompt's model calls or bytes went over their bounds.
	limitModelCalls = "model_calls_exceeded"
	limitModelBytes = "model_bytes_exceeded"
)

// Prompts run one at a time, FIFO; a full queue is 503 (DESIGN.md §7). The
// upper bound keeps one session's queue small enough to allocate up front.
const (
	defaultMaxPendingPrompts = 5
	maxMaxPendingPrompts     = 1000
)

// serve's limits: flag defaults and bounds (DESIGN.md §6). Durations are
// milliseconds.
const (
	// live sessions
	defaultMaxSessions = 32
	maxMaxSessions     = 10000
	// ACP children sessions are placed on (serve_children.go). Sessions of
	// every workspace share them. A child runs on one scheduler slot
	// (runAgent) and costs about 8 MiB resident. Measured on two cores, 32
	// busy sessions made 900-1,000 guarded calls a second on four children
	// against 600-750 on two (a child waits in the kernel while it writes
	// files), and 128 idle sessions in 128 workspaces fit in about 50 MiB
	// with serve (two children: 33 MiB, one: 25 MiB), created in 1.5 ms at
	// the median either way. One child's death ends only a quarter of the
	// sessions. The bound is the most processes one daemon starts.
	defaultMaxChildren = 4
	maxMaxChildren     = 64
	// SSE streams per session
	defaultMaxSubscribers = 8
	maxMaxSubscribers     = 1000
	// events per session kept for Last-Event-ID replay
	defaultEventRingSize = 4096
	maxEventRingSize     = 1 << 20
	// a child's initialize
	defaultInitializeTimeoutMs = 10000
	minInitializeTimeoutMs     = 100
	maxInitializeTimeoutMs     = 600000
	// A prompt deadline and a permission timeout (0 = none): at most a day.
	maxPromptDeadlineMs    = 86400000
	maxPermissionTimeoutMs = 86400000
	// The idle timeout: at least a second, at most a week.
	defaultSessionIdleTimeoutMs = 1800000
	minSessionIdleTimeoutMs     = 1000
	maxSessionIdleTimeoutMs     = 604800000
)

// serveLimits bound what callers can make the daemon hold. A zero count or
// a zero InitializeTimeout or SessionIdleTimeout takes its default; a zero
// PromptDeadline or PermissionTimeout means none.
type serveLimits struct {
	MaxSessions        int
	MaxSubscribers     int // SSE streams per session
	EventRingSize      int // events per session kept for Last-Event-ID replay
	InitializeTimeout  time.Duration
	PromptDeadline     time.Duration
	PermissionTimeout  time.Duration
	SessionIdleTimeout time.Duration
	MaxEventMemory     int64 // bytes of events every ring and queue may hold together
	MaxChildren        int   // ACP children sessions are placed on
}

// withDefaults fills every zero limit that has a default.
func (l serveLimits) withDefaults() serveLimits {
	if l.MaxSessions == 0 {
		l.MaxSessions = defaultMaxSessions
	}
	if l.MaxChildren == 0 {
		l.MaxChildren = defaultMaxChildren
	}
	if l.MaxSubscribers == 0 {
		l.MaxSubscribers = defaultMaxSubscribers
	}
	if l.EventRingSize == 0 {
		l.EventRingSize = defaultEventRingSize
	}
	if l.InitializeTimeout == 0 {
		l.InitializeTimeout = defaultInitializeTimeoutMs * time.Millisecond
	}
	if l.SessionIdleTimeout == 0 {
		l.SessionIdleTimeout = defaultSessionIdleTimeoutMs * time.Millisecond
	}
	if l.MaxEventMemory == 0 {
		l.MaxEventMemory = defaultMaxEventMemory
	}
	return l
}
