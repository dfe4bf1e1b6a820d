package link

// MaxMessageBytes bounds one gRPC message either way: a write's content or
// a reply's page.
const MaxMessageBytes = 128 << 20

// MaxStreams bounds the gRPC streams a server serves at once; the
// front-end's --max-calls stays at or below it.
const MaxStreams = 256

// The transport's sizing, the same on both ends: a stream window holds a
// default page (262144 bytes) and its framing whole, the connection's a
// few of them, and one read or write system call moves up to 64 KiB.
// With one peer on a socketpair, static windows end the BDP pings and
// mid-message window updates, each an extra wake-up of both processes.
const (
	streamWindow  = 1 << 20
	connWindow    = 4 << 20
	ioBufferBytes = 64 << 10
)

// streamWorkers is how many goroutines serve calls between calls: the
// front-end's default --max-session-calls.
const streamWorkers = 16

// Metadata keys of a call under --rules.
const (
	// ToolMetadata is the call's tool name, without --tools-prefix.
	ToolMetadata = "fsmcp-tool"
	// JudgedMetadata is a JudgedPaths message: what Check judged for the
	// call (absent when the call names no path).
	JudgedMetadata = "fsmcp-judged-bin"
)
