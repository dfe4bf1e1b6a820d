// Package callstream is the front-end's side of the worker's Calls
// stream: a worker client that sends small calls (a stat, a list page, a
// read or write of at most 64 KiB) as messages on one long-lived stream,
// each with an id, its deadline and its metadata, and every other call as
// its own RPC. The front-end and the worker's conformance tests use the
// same client, so the escape table and the fuzzer reach the stream as
// the front-end does.
package callstream
