// proc_stat.go extends the proc group with what /proc says about
// processes: the one reader of /proc/<pid>/stat, the one scan of every
// process, and the one walk of a process's descendants through the
// kernel's children files. The reaper (reaper.go) and the peer check
// (serve_peer.go) read processes only through these. Its decimal reader
// (parseDigits) is the one of flags and socket tables too.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// procInfo is what /proc/<pid>/stat says about one process.
type procInfo struct {
	pid, ppid, pgid, sid int
	state                byte   // R, S, D, T, t, Z, X...
	start                uint64 // clock ticks after boot: with pid, names one process
}

func (p procInfo) dead() bool { return p.state == 'Z' || p.state == 'X' }

// errProcStat is returned for a stat line that does not parse.
var errProcStat = errors.New("malformed /proc stat line")

// parseProcStat reads "pid (comm) state ppid pgrp session ... starttime ...".
// comm is chosen by the process and may hold spaces and parentheses; it ends
// at the last ')'. Numbers are as the kernel writes them: digits only.
func parseProcStat(b []byte) (procInfo, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return procInfo{}, errProcStat
	}
	var p procInfo
	var ok bool
	if p.pid, ok = parseDigits[int](bytes.TrimSuffix(b[:open], []byte(" "))); !ok || p.pid == 0 {
		return procInfo{}, errProcStat
	}
	f := bytes.Fields(b[end+1:])
	// starttime is field 22 of the line, the 20th after comm.
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, errProcStat
	}
	p.state = f[0][0]
	for i, dst := range []*int{&p.ppid, &p.pgid, &p.sid} {
		if *dst, ok = parseDigits[int](f[1+i]); !ok {
			return procInfo{}, errProcStat
		}
	}
	if p.start, ok = parseDigits[uint64](f[19]); !ok {
		return procInfo{}, errProcStat
	}
	return p, nil
}

func readProcStat(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	return parseProcStat(b)
}

// scanProcs returns every process /proc shows now.
func scanProcs() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procInfo, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := readProcStat(pid); err == nil {
			out = append(out, p)
		}
	}
	return out
}

const (
	// maxDescendants bounds the walk of descendantsOf: the processes it
	// finds and the threads whose children files it reads. Each one costs
	// the peer check a few reads on every new connection, so a tree larger
	// than this is not walked, and the walk answers an error: the check
	// then refuses (fail closed) rather than let a descendant through.
	maxDescendants = 1 << 14
	// descendantWalkPasses is how many times the walk reads the children
	// files of every process it knows. A thread that exits hands its
	// children to another thread or to a subreaper, perhaps one the pass
	// already read: the next pass finds them there.
	descendantWalkPasses = 2
)

// tooManyDescendants is the walk's answer for a tree over its bound.
func tooManyDescendants(limit int) error {
	return fmt.Errorf("walk the process tree: more than %d processes or threads below this daemon", limit)
}

// childReader reads the children files of a process's threads
// (/proc/<pid>/task/<tid>/children: the kernel lists a child under the
// thread that started it) into one reused buffer.
type childReader struct {
	buf   []byte
	limit int // maxDescendants, but in tests
	tasks int // threads read in this pass, for limit
}

// childrenOf returns the children of the process proc names ("self" or a
// pid), from the children file of each of its threads. A process or thread
// that ended meanwhile has none; any other file that cannot be read or
// parsed is an error, after the others are read.
func (r *childReader) childrenOf(proc string) (kids []int, err error) {
	taskDir := "/proc/" + proc + "/task/"
	dir, err := os.Open(taskDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the threads of %q: %w", taskDir, err)
	}
	tids, err := dir.Readdirnames(-1)
	dir.Close()
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the threads of %q: %w", taskDir, err)
	}
	var first error
	for _, tid := range tids {
		r.tasks++
		if r.tasks > r.limit {
			return kids, tooManyDescendants(r.limit)
		}
		path := taskDir + tid + "/children"
		found, err := r.read(path)
		if errors.Is(err, syscall.ENOENT) {
			if _, serr := os.Stat(taskDir + tid); errors.Is(serr, os.ErrNotExist) {
				continue // the thread ended meanwhile
			}
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("read %q: %w", path, err)
			}
			continue
		}
		kids = append(kids, found...)
	}
	return kids, first
}

// read reads one children file: pids, each followed by a space.
func (r *childReader) read(path string) ([]int, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 4<<10) // some 500 pids; it grows for more
	}
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := syscall.Read(fd, r.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	var kids []int
	for _, f := range bytes.Fields(r.buf[:n]) {
		pid, ok := parseDigits[int](f)
		if !ok || pid == 0 {
			return nil, fmt.Errorf("not a pid: %q", f)
		}
		kids = append(kids, pid)
	}
	return kids, nil
}

// descendantsOf returns the processes below root (root not included),
// following the children files down from root, without visiting any other
// process. It fails closed: a process of the tree whose children cannot be
// read, or a tree over maxDescendants, is an error, never a shorter list.
// A process that ended meanwhile is skipped (its children were handed to a
// subreaper or another thread, which a pass reads).
func descendantsOf(root int) ([]int, error) { return descendantsWithin(root, maxDescendants) }

// descendantsWithin is descendantsOf with the bound limit.
func descendantsWithin(root, limit int) ([]int, error) {
	r := childReader{limit: limit}
	seen := map[int]bool{root: true}
	var out []int
	for range descendantWalkPasses {
		r.tasks = 0
		queue := append([]int{root}, out...)
		for i := 0; i < len(queue); i++ {
			kids, err := r.childrenOf(strconv.Itoa(queue[i]))
			if err != nil {
				return nil, err
			}
			for _, k := range kids {
				if seen[k] {
					continue
				}
				seen[k] = true
				out = append(out, k)
				if len(out) > limit {
					return nil, tooManyDescendants(limit)
				}
				queue = append(queue, k)
			}
		}
	}
	return out, nil
}
