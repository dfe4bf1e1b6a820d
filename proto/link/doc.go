// Package link is what the front-end, the worker and the command runner
// must agree on to speak over their socketpair: the bounds and sizing of
// the gRPC transport, the metadata keys a call carries, the error a call
// fails with and its gRPC form both ways, serving and dialling on a
// connected socket, and the checks both ends make of a client's path and
// of a sha256 digest. Both processes link it; it links neither of them,
// nor the sandbox nor the MCP SDK, so that what one end sends the other
// reads with the same code.
package link
