package rulesfile

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/fsmcp/fsmcp/sandbox"
	"golang.org/x/sys/unix"
)

// The --rules reader: a process of its own (sandbox.StartRulesReader),
// confined to reading files in the rules file's directory
// (sandbox.ConfineRulesReader), which the worker asks for the file's
// current version. The worker, which faces the agent, is then granted
// nothing beside the rules file: a compromised worker cannot read a token
// file kept next to it.
//
// The exchange on their socket: the worker writes one byte, rulesAsk; the
// reader answers a status byte, an 8-byte big-endian length and that many
// bytes: for rulesSame nothing (the version the reader last sent); for
// rulesNew the stamp (7 big-endian uint64s) and the file's bytes; for
// rulesFailed the stamp and the error's text. Anything else from the
// worker ends the reader.

const (
	rulesAsk    = 'v'
	rulesSame   = 0
	rulesNew    = 1
	rulesFailed = 2
	stampBytes  = 7 * 8
	// rulesReplyTimeout bounds how long the worker waits for an answer.
	rulesReplyTimeout = 5 * time.Second
)

// ReaderMain is the reader process: args are those after
// sandbox.RulesSubcommand. It returns the exit code.
func ReaderMain(args []string) int {
	if err := runRulesReader(args); err != nil {
		fmt.Fprintf(os.Stderr, "fsmcp rules reader: %v\n", err)
		return 1
	}
	return 0
}

func runRulesReader(args []string) error {
	fs := flag.NewFlagSet(sandbox.RulesSubcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dirFD := fs.Int("dir-fd", -1, "")
	sockFD := fs.Int("sock-fd", -1, "")
	name := fs.String("name", "", "")
	allowNoLandlock := fs.Bool("allow-no-landlock", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dirFD < 3 || *sockFD < 3 || *name == "" || strings.Contains(*name, "/") || fs.NArg() != 0 {
		return errors.New("want --dir-fd, --sock-fd and --name (a plain file name)")
	}
	if _, err := sandbox.CloseInherited(3, *dirFD, *sockFD); err != nil {
		return err
	}
	_, _, err := sandbox.ConfineRulesReader(fmt.Sprintf("/proc/self/fd/%d", *dirFD))
	if err != nil && !(errors.Is(err, sandbox.ErrNoLandlock) && *allowNoLandlock) {
		return err
	}
	src := &dirSource{dir: os.NewFile(uintptr(*dirFD), "rules-dir"), name: *name}
	sock := os.NewFile(uintptr(*sockFD), "rules-socket")
	ask := make([]byte, 1)
	for {
		if _, err := io.ReadFull(sock, ask); err != nil {
			return nil // the worker is gone
		}
		if ask[0] != rulesAsk {
			return fmt.Errorf("unexpected request byte %#x", ask[0])
		}
		data, stamp, changed, err := src.poll()
		var reply []byte
		switch {
		case err != nil:
			reply = rulesFrame(rulesFailed, stamp, []byte(err.Error()))
		case changed:
			reply = rulesFrame(rulesNew, stamp, data)
		default:
			reply = []byte{rulesSame, 0, 0, 0, 0, 0, 0, 0, 0}
		}
		if _, err := sock.Write(reply); err != nil {
			return nil
		}
	}
}

func rulesFrame(status byte, st Stamp, body []byte) []byte {
	b := make([]byte, 9, 9+stampBytes+len(body))
	b[0] = status
	binary.BigEndian.PutUint64(b[1:9], uint64(stampBytes+len(body)))
	for _, v := range []uint64{st.dev, st.ino, uint64(st.size), uint64(st.mtime.Sec), uint64(st.mtime.Nsec), uint64(st.ctime.Sec), uint64(st.ctime.Nsec)} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return append(b, body...)
}

// readerSource asks the reader process.
type readerSource struct {
	conn net.Conn
}

func (r *readerSource) poll() ([]byte, Stamp, bool, error) {
	r.conn.SetDeadline(time.Now().Add(rulesReplyTimeout))
	if _, err := r.conn.Write([]byte{rulesAsk}); err != nil {
		return nil, Stamp{}, false, fmt.Errorf("the rules reader: %w", err)
	}
	var head [9]byte
	if _, err := io.ReadFull(r.conn, head[:]); err != nil {
		return nil, Stamp{}, false, fmt.Errorf("the rules reader: %w", err)
	}
	n := binary.BigEndian.Uint64(head[1:])
	switch {
	case head[0] == rulesSame && n == 0:
		return nil, Stamp{}, false, nil
	case head[0] != rulesNew && head[0] != rulesFailed, n < stampBytes, n > stampBytes+maxRulesBytes:
		return nil, Stamp{}, false, fmt.Errorf("the rules reader answered status %d with %d bytes", head[0], n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return nil, Stamp{}, false, fmt.Errorf("the rules reader: %w", err)
	}
	var v [7]uint64
	for i := range v {
		v[i] = binary.BigEndian.Uint64(body[i*8:])
	}
	st := Stamp{dev: v[0], ino: v[1], size: int64(v[2]),
		mtime: unix.Timespec{Sec: int64(v[3]), Nsec: int64(v[4])}, ctime: unix.Timespec{Sec: int64(v[5]), Nsec: int64(v[6])}}
	if head[0] == rulesFailed {
		return nil, st, false, errors.New(string(body[stampBytes:]))
	}
	return body[stampBytes:], st, true, nil
}

// Start starts the reader of the rules file at file (an absolute path) as
// exe and reads the rules through it; they must parse.
func Start(exe, file string, allowNoLandlock bool) (*File, error) {
	d, name, err := openDir(file)
	if err != nil {
		return nil, err
	}
	reader, err := sandbox.StartRulesReader(exe, d, name, allowNoLandlock, os.Stderr)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("--rules: %w", err)
	}
	r, err := newFile(&readerSource{conn: reader.Conn})
	if err != nil {
		reader.Conn.Close()
		return nil, fmt.Errorf("--rules %s: %w", file, err)
	}
	return r, nil
}
