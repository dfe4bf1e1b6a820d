package frontend

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/fsmcp/fsmcp/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// The HTTP transport. It does not authenticate anything but possession of
// one bearer token, does not encrypt (put TLS in front of a non-loopback
// listener), and does not rate-limit: every holder of the token has the
// full tool set on the root. What it does: /mcp answers only requests
// that carry the token and come from no browser Origin or a loopback or
// allow-listed one; the socket and the token are obtained before the
// front-end confines itself, after which it can neither bind nor connect.

const (
	mcpPath    = "/mcp"
	healthPath = "/health"
	// tokenBytes of randomness in a generated token (256 bits).
	tokenBytes = 32
	// minTokenLen refuses a token file too short to resist guessing.
	minTokenLen = 16
	// peerHeader carries the HTTP peer's address from the gate to the
	// audit log. The gate overwrites whatever a client sent under it.
	peerHeader = "Fsmcp-Peer"
	// maxRequestBytes bounds one request body (413 beyond): room for an
	// fs_write of 24 MiB as base64, a quarter of a gRPC message.
	maxRequestBytes = 32 << 20
)

// endpoint is what the front-end acquires before it confines itself:
// after ConfineFrontend it can open no file and bind no socket, so the
// audit log, the listener and the token must already be in hand.
type endpoint struct {
	audit *auditLog
	http  *httpEndpoint // nil for stdio
}

// readyLine is the one line a start prints by default, once the server
// can answer: the version, the root, where it serves and where the audit
// log goes.
func readyLine(cfg *Config, where string) string {
	audit := "stderr"
	if cfg.AuditLog != "" {
		audit = cfg.AuditLog
	}
	return fmt.Sprintf("fsmcp %s: serving %s on %s; audit log on %s", Version, cfg.Root, where, audit)
}

// httpEndpoint is a bound (or inherited) listener and the token that
// /mcp requires.
type httpEndpoint struct {
	ln        net.Listener
	activated bool
	tokenSum  [sha256.Size]byte
	// token is kept only when generated, to be printed once.
	token string
	// ready is the line that says the server answers, given where.
	ready   func(where string) string
	origins []string
	// readTimeout bounds reading one request, headers and body.
	readTimeout time.Duration
	// sessionIdle closes a session unused this long; maxSessions caps
	// how many are kept.
	sessionIdle time.Duration
	maxSessions int
	// health asks the worker whether it can serve (its root still
	// exists); nil until the worker runs.
	health func(context.Context) error
}

// prepare opens the audit log and, for --transport http, takes the
// socket-activated listener or binds --listen, and reads or generates the
// token.
func prepare(cfg *Config, stderr io.Writer) (*endpoint, error) {
	activated := activation.Files(true)
	// Anything else the launcher left open is closed before the front-end
	// opens its own: Landlock governs opening, not open descriptors, and
	// the worker would inherit one not marked close-on-exec. systemd's
	// sockets are 3 onwards (SD_LISTEN_FDS_START).
	keep := make([]int, len(activated))
	for i := range keep {
		keep[i] = 3 + i
	}
	if n, err := sandbox.CloseInherited(3, keep...); err != nil {
		return nil, err
	} else if n > 0 && cfg.Verbose {
		fmt.Fprintf(stderr, "fsmcp: closed %d inherited descriptors\n", n)
	}
	audit, err := openAudit(cfg.AuditLog, stderr)
	if err != nil {
		return nil, err
	}
	e := &endpoint{audit: audit}
	if cfg.Transport != "http" {
		return e, nil
	}
	h := &httpEndpoint{origins: cfg.AllowOrigins, readTimeout: cfg.HTTPReadTimeout,
		sessionIdle: cfg.HTTPSessionIdle, maxSessions: cfg.HTTPMaxSessions,
		ready: func(where string) string { return readyLine(cfg, where) }}
	e.http = h
	token, generated, err := loadToken(cfg.TokenFile, stderr)
	if err != nil {
		e.close()
		return nil, err
	}
	h.tokenSum = sha256.Sum256([]byte(token))
	if generated {
		h.token = token
	}
	if len(activated) > 0 {
		h.ln, err = activatedListener(activated)
		h.activated = true
	} else {
		h.ln, err = net.Listen("tcp", cfg.Listen)
	}
	if err != nil {
		e.close()
		return nil, err
	}
	if addr := h.ln.Addr(); addr.Network() == "tcp" {
		host, _, _ := net.SplitHostPort(addr.String())
		if !isLoopbackHost(host) {
			if !cfg.AllowRemote {
				e.close()
				return nil, fmt.Errorf("listener %s is not on a loopback address: pass --allow-remote to serve other hosts", addr)
			}
			fmt.Fprintf(stderr, "fsmcp: WARNING: serving %s, which is not a loopback address: whoever can reach it and holds the token has the whole root; put TLS in front\n", addr)
		}
	}
	return e, nil
}

func (e *endpoint) close() {
	if e.http != nil && e.http.ln != nil {
		e.http.ln.Close()
	}
	e.audit.close()
}

// serve runs srv on stdio (conn) or HTTP until ctx ends or, for stdio,
// the client hangs up. When ctx ends, calls in flight answer before the
// connection closes.
func (e *endpoint) serve(ctx context.Context, srv *mcp.Server, conn *stdioConn, stderr io.Writer) error {
	if e.http == nil {
		return e.serveStdio(ctx, srv, conn)
	}
	return e.http.serve(ctx, srv, stderr)
}

// stopGrace is how long calls in flight may take to answer once the
// front-end is stopping (stdin closed, a signal, the worker gone), before
// they are answered unavailable and cancelled.
const stopGrace = 5 * time.Second

// serveStdio is mcp.Server.Run over the front-end's own connection
// (wire.go), which drains the calls in flight on stdin EOF by itself.
// When ctx ends first, the connection refuses new calls, lets those in
// flight answer (up to stopGrace), answers the rest, and only then does
// the session close.
func (e *endpoint) serveStdio(ctx context.Context, srv *mcp.Server, conn *stdioConn) error {
	ss, err := srv.Connect(context.WithoutCancel(ctx), conn, nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
	}
	cause := "stopping"
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		cause = c.Error()
	}
	conn.stop(cause, conn.grace)
	conn.end(io.EOF)
	ss.Close()
	<-ended
	return ctx.Err()
}

// activatedListener wraps the one listening socket systemd passed
// (sd_listen_fds(3), through go-systemd's activation package, which checks
// LISTEN_PID, unsets the variables so that nothing started later takes the
// sockets for its own, and marks them close-on-exec so the worker does not
// inherit them). It never binds.
func activatedListener(files []*os.File) (net.Listener, error) {
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(files) != 1 {
		return nil, fmt.Errorf("socket activation passed %d sockets, want 1", len(files))
	}
	// Accepting on a connected socket would fail on the first client;
	// say now what is wrong.
	if v, err := unix.GetsockoptInt(int(files[0].Fd()), unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		return nil, errors.New("socket activation: descriptor 3 is not a listening socket (for a per-connection socket, use --transport stdio)")
	}
	ln, err := net.FileListener(files[0])
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	return ln, nil
}

// loadToken reads the bearer token from path, or generates one when path
// is empty.
func loadToken(path string, stderr io.Writer) (token string, generated bool, err error) {
	if path == "" {
		b := make([]byte, tokenBytes)
		if _, err := rand.Read(b); err != nil {
			return "", false, bug(err)
		}
		return base64.RawURLEncoding.EncodeToString(b), true, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", false, fmt.Errorf("--token-file: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false, fmt.Errorf("--token-file: %w", err)
	}
	token = strings.TrimSpace(string(b))
	switch {
	case len(token) < minTokenLen:
		return "", false, fmt.Errorf("--token-file %s: the token must be at least %d characters", path, minTokenLen)
	case strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", false, fmt.Errorf("--token-file %s: the token must be one line of printable characters", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(stderr, "fsmcp: WARNING: --token-file %s is readable by other users (mode %04o)\n", path, fi.Mode().Perm())
	}
	return token, false, nil
}

func bug(err error) error { return fmt.Errorf("BUG(fsmcp): %w", err) }

// checkListen refuses a non-loopback --listen unless allowRemote.
func checkListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %v", addr, err)
	}
	if !isLoopbackHost(host) && !allowRemote {
		return fmt.Errorf("--listen %s is not a loopback address: pass --allow-remote to serve other hosts", addr)
	}
	return nil
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP.
// An empty host (all interfaces) is not.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// parseOrigin checks an --allow-origin value and returns it in the form
// browsers send: scheme://host[:port], lower case.
func parseOrigin(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an origin (scheme://host[:port])", v)
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// originAllowed implements the Origin check the MCP Streamable HTTP
// transport requires against DNS rebinding: no Origin (not a browser), a
// loopback one, or one allow-listed.
func originAllowed(values []string, allow []string) bool {
	switch len(values) {
	case 0:
		return true
	case 1:
	default:
		return false
	}
	o, err := parseOrigin(values[0])
	if err != nil {
		return false // "null" and anything else that is not scheme://host
	}
	if slices.Contains(allow, o) {
		return true
	}
	u, _ := url.Parse(o)
	return isLoopbackHost(u.Hostname())
}

// authorized compares the request's bearer token with the expected one in
// constant time: both are hashed first, so neither length nor content
// leaks through timing.
// It also says whether the request carried an Authorization header.
func (h *httpEndpoint) authorized(r *http.Request) (has, ok bool) {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return len(values) > 0, false
	}
	scheme, token, found := strings.Cut(values[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return true, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return true, subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) == 1
}

// gate admits a request to next only with an acceptable Origin (else 403)
// and the bearer token (else 401). A browser's CORS preflight from an
// acceptable Origin is answered here, before the token, which browsers
// never send on a preflight. Refusals close the connection at once,
// without reading a body the client may be sending slowly.
func (h *httpEndpoint) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Values("Origin")
		if !originAllowed(origin, h.origins) {
			refuse(w, http.StatusForbidden, "fsmcp: this Origin is not allowed; start fsmcp with --allow-origin ORIGIN to allow a web page's origin")
			return
		}
		if len(origin) == 1 {
			corsHeaders(w.Header(), origin[0])
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				preflight(w)
				return
			}
		}
		if has, ok := h.authorized(r); !ok {
			challenge := `Bearer realm="fsmcp", error_description="send Authorization: Bearer TOKEN, with the token of --token-file or the one fsmcp printed when it started"`
			if has {
				challenge = `Bearer realm="fsmcp", error="invalid_token", error_description="the bearer token is not this server's"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			refuse(w, http.StatusUnauthorized, "fsmcp: /mcp needs the header \"Authorization: Bearer TOKEN\", with the token of --token-file or the one fsmcp printed on stderr when it started")
			return
		}
		// Tool handlers see the request's headers: the token stays here.
		r.Header.Del("Authorization")
		r.Header.Set(peerHeader, r.RemoteAddr)
		next.ServeHTTP(w, r)
	})
}

// refuse answers a refused request and closes the connection: net/http
// would otherwise read up to 256 KiB of an unread body before answering.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// The CORS response headers for an Origin the gate accepts. The Origin is
// echoed, never "*": a page from any other origin gets no CORS headers, so
// its browser refuses it the response.
const (
	corsMethods     = "GET, POST, DELETE"
	corsHeaderNames = "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
	corsExposed     = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
)

func corsHeaders(hdr http.Header, origin string) {
	hdr.Set("Access-Control-Allow-Origin", origin)
	hdr.Add("Vary", "Origin")
	hdr.Set("Access-Control-Expose-Headers", corsExposed)
}

// preflight answers a CORS preflight from an accepted Origin.
func preflight(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Methods", corsMethods)
	hdr.Set("Access-Control-Allow-Headers", corsHeaderNames)
	hdr.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// handler routes /mcp through the gate to go-sdk's Streamable HTTP
// handler, and answers /health without authentication.
func (h *httpEndpoint) handler(srv *mcp.Server) http.Handler {
	srv.AddReceivingMiddleware(newSessionCap(h.maxSessions).middleware)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		// A client that gives up on a call closes its request; the
		// call's context, and with it the worker's RPC, ends too.
		PropagateRequestCancellation: true,
		// A session a client abandons without DELETE is closed once
		// idle this long (and sooner when the cap needs room).
		SessionTimeout:      h.sessionIdle,
		MaxRequestBodyBytes: maxRequestBytes,
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+healthPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if h.health != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			err := h.health(ctx)
			cancel()
			if err != nil {
				// 503 with the worker's reason (the served directory
				// was deleted), which names no host path.
				reason, _ := json.Marshal(fromRPC(err).message)
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"status":"unavailable","reason":`+string(reason)+"}\n")
				return
			}
		}
		io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	mux.Handle(mcpPath, h.gate(mcpHandler))
	return mux
}

// serve answers HTTP on the listener until ctx ends, then lets requests
// in flight finish for a moment.
func (h *httpEndpoint) serve(ctx context.Context, srv *mcp.Server, stderr io.Writer) error {
	hs := &http.Server{
		Handler:           h.handler(srv),
		ReadHeaderTimeout: 10 * time.Second,
		// Headers and body: a client sending slowly holds a
		// descriptor only this long. A call whose request was read in
		// time answers however long it runs (TestContactHTTPReadTimeout).
		ReadTimeout:    h.readTimeout,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       log.New(stderr, "fsmcp: http: ", 0),
	}
	where := "http://" + h.ln.Addr().String() + mcpPath
	if h.ln.Addr().Network() == "unix" {
		where = "unix socket " + h.ln.Addr().String() + ", path " + mcpPath
	}
	how := "bound"
	if h.activated {
		how = "socket-activated"
	}
	token := "bearer token from --token-file"
	if h.token != "" {
		token = "bearer token: " + h.token
		h.token = ""
	}
	fmt.Fprintln(stderr, h.ready(fmt.Sprintf("%s (%s; %s)", where, how, token)))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(h.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// Open event streams never become idle: cut them.
		hs.Close()
	}
	<-errc
	return nil
}
