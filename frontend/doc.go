// Package frontend is the MCP half of fsmcp. It speaks MCP to the client,
// validates every tool call against a strict schema, and forwards it over
// gRPC to the worker, which alone can touch the served directory.
//
// Package frontend trusts nothing the client sends and holds no filesystem
// authority once the worker runs: it confines itself with Landlock to no
// filesystem access at all. It does not stop a client from asking the
// worker for anything inside the root; that is the point of the server.
package frontend
