//go:build linux

package stageproto

// Reading and writing a pipe of the runtime's poller with raw system
// calls, which do not wake the Go scheduler's monitor thread.
//
// Every system call made through package syscall's Syscall enters the
// scheduler's syscall state, and the first one after the process was idle
// wakes the scheduler's monitor thread (sysmon) from its deep sleep: a
// thread that then runs, sleeps 20 µs, runs again and goes back to sleep.
// A stage's chunk makes each process idle once per round trip, so each
// paid for those wake-ups on every chunk: on this kind of VM, where a
// context switch costs several µs, they were half of a Go program's round
// trip (measured in BenchmarkChunk). A read or write of a non-blocking
// pipe never blocks, so it needs none of that state: rawReader and
// rawWriter make it with syscall.RawSyscall inside the file's RawConn,
// which waits in the poller when the pipe is empty or full as the file's
// own Read and Write do.

import (
	"io"
	"syscall"
	"unsafe"
)

// pipeReader returns a reader of r that reads with raw system calls when
// r is a non-blocking file of the runtime's poller, and r otherwise.
func pipeReader(r io.Reader) io.Reader {
	if rc := pollable(r); rc != nil {
		pr := &rawReader{rc: rc}
		pr.read = pr.readFd
		return pr
	}
	return r
}

// pipeWriter is pipeReader's counterpart for writing.
func pipeWriter(w io.Writer) io.Writer {
	if rc := pollable(w); rc != nil {
		pw := &rawWriter{rc: rc}
		pw.write = pw.writeFd
		return pw
	}
	return w
}

// pollable returns the RawConn of v when v is a file (an *os.File, or
// exec.Cmd's pipe, which embeds one) whose descriptor is non-blocking:
// one of the poller's, which a raw read or write never blocks.
func pollable(v any) syscall.RawConn {
	f, ok := v.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	err = rc.Control(func(fd uintptr) {
		flags, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonblocking = errno == 0 && flags&syscall.O_NONBLOCK != 0
	})
	if err != nil || !nonblocking {
		return nil
	}
	return rc
}

// rawReader reads a non-blocking file. It is not safe for concurrent use.
type rawReader struct {
	rc   syscall.RawConn
	read func(fd uintptr) bool // readFd, bound once
	p    []byte                // the current Read's buffer
	n    int
	err  error
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.read)
	r.p = nil
	if err != nil {
		return 0, err
	}
	return r.n, r.err
}

// readFd reads once into r.p; false asks the poller to wait for data.
func (r *rawReader) readFd(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch errno {
		case 0:
			if r.n = int(n); n == 0 {
				r.err = io.EOF
			}
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.err = errno
			return true
		}
	}
}

// rawWriter writes a non-blocking file. It is not safe for concurrent use.
type rawWriter struct {
	rc    syscall.RawConn
	write func(fd uintptr) bool // writeFd, bound once
	p     []byte                // what the current Write has left to write
	err   error
}

func (w *rawWriter) Write(p []byte) (int, error) {
	w.p, w.err = p, nil
	err := w.rc.Write(w.write)
	n := len(p) - len(w.p)
	w.p = nil
	if err == nil {
		err = w.err
	}
	return n, err
}

// writeFd writes what is left of w.p; false asks the poller to wait for
// room in the pipe.
func (w *rawWriter) writeFd(fd uintptr) bool {
	for len(w.p) > 0 {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.p[0])), uintptr(len(w.p)))
		switch errno {
		case 0:
			w.p = w.p[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.err = errno
			return true
		}
	}
	return true
}
