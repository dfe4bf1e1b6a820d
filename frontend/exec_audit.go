package frontend

import (
	"encoding/json"
	"strconv"

	"github.com/fsmcp/fsmcp/proto/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The audit log's command fields: argv as given (clipped), and how the
// command ended. Never stdin, stdout or stderr.
const (
	maxAuditArgs   = 64
	maxAuditArgLen = 256
)

// auditArgv renders a call's argv argument as a JSON array, each argument
// clipped to maxAuditArgLen bytes and at most maxAuditArgs of them. It
// returns nil when the call has no argv.
func auditArgv(raw json.RawMessage) (argv []byte, clipped bool) {
	var args struct {
		Argv []string `json:"argv"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &args) != nil || args.Argv == nil {
		return nil, false
	}
	if len(args.Argv) > maxAuditArgs {
		args.Argv, clipped = args.Argv[:maxAuditArgs], true
	}
	b := []byte{'['}
	for i, a := range args.Argv {
		if len(a) > maxAuditArgLen {
			a, clipped = string(trimPartialRune([]byte(a[:maxAuditArgLen]))), true
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendString(b, a)
	}
	return append(b, ']'), clipped
}

// auditExit adds how a command ended, read from a successful command
// reply: exit (a number or null) and signal when one ended it.
func auditExit(o *obj, res *mcp.CallToolResult) {
	if res == nil || res.IsError || len(res.Content) == 0 {
		return
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return
	}
	var doc struct {
		Exit     *int64  `json:"exit"`
		Signal   *string `json:"signal"`
		TimedOut *bool   `json:"timed_out"`
	}
	if json.Unmarshal([]byte(tc.Text), &doc) != nil || doc.TimedOut == nil {
		return // not a command's reply
	}
	if doc.Exit != nil {
		o.rawValue("exit", strconv.AppendInt(nil, *doc.Exit, 10))
	} else {
		o.rawValue("exit", []byte("null"))
	}
	if doc.Signal != nil {
		o.str("signal", *doc.Signal)
	}
	o.bool("timed_out", *doc.TimedOut)
}
