// lifeline_test.go checks that an ACP runtime whose parent dies still runs
// its shutdown: serve SIGKILLed with or without a prompt running leaves no
// process of the child's session, a managed child gets SIGTERM when serve
// dies, and a closed stdout ends an acp as the end of its input does.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sessionMembers returns every process in session sid.
func sessionMembers(sid int) []procInfo {
	var out []procInfo
	for _, p := range scanProcs() {
		if p.sid == sid {
			out = append(out, p)
		}
	}
	return out
}

// TestServeKilledLeavesNoProcess: serve, a real process, is killed with
// SIGKILL while its child has a background command and (in one case) a
// running prompt with a foreground command. The child notices, cancels the
// prompt, kills the background group and exits: no process of its session
// remains.
func TestServeKilledLeavesNoProcess(t *testing.T) {
	for _, running := range []bool{true, false} {
		t.Run(fmt.Sprintf("prompt running %v", running), func(t *testing.T) {
			prov := newTestProvider(t)
			ws := t.TempDir()
			args, tokenEnv := guardArgs(t, prov, ws, filepath.Join(t.TempDir(), "d.jsonl"))
			sp := startServe(t, args, tokenEnv)
			id := sp.newSession(t, "")
			// The job started under set -m leaves for a process group of its
			// own inside the session: killing the background group misses it.
			background := shellCall("echo $$ > bg.pid; sleep 300 & echo $! > bg-sleep.pid; set -m; sleep 300 & echo $! > job.pid; wait", true)
			if running {
				sp.prompt(t, id, background+"\n"+shellCall("sleep 300 & echo $! > fg.pid; wait; echo not-killed", false))
				readPIDFile(t, filepath.Join(ws, "fg.pid"))
			} else {
				sp.runTurn(t, id, background)
			}
			bg := readPIDFile(t, filepath.Join(ws, "bg.pid"))
			readPIDFile(t, filepath.Join(ws, "bg-sleep.pid"))
			job := readPIDFile(t, filepath.Join(ws, "job.pid"))
			t.Cleanup(func() { syscall.Kill(job, syscall.SIGKILL) })
			if g := mustProcStat(t, job).pgid; g == bg {
				t.Fatalf("the set -m job %d stayed in the background group %d", job, g)
			}
			child := parentPID(bg)
			if parentPID(child) != sp.cmd.Process.Pid {
				t.Fatalf("the background shell's parent %d is not a child of serve %d", child, sp.cmd.Process.Pid)
			}
			members := sessionMembers(child)
			want := 4 // the child, the background shell and its two sleeps
			if running {
				want += 2 // the foreground shell and its sleep
			}
			if len(members) < want {
				t.Fatalf("session %d has %d processes %+v, want at least %d", child, len(members), members, want)
			}

			if err := sp.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			for _, p := range members {
				deadline := time.Now().Add(testTimeout(30 * time.Second))
				for {
					now, err := readProcStat(p.pid)
					if err != nil || now.start != p.start || now.dead() {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("process %d of the child's session outlived serve: %+v", p.pid, now)
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

// runDeathSignalChild is a child that answers initialize and session/new,
// and after its stdin ends waits for SIGTERM and writes "SIGTERM" to path.
func runDeathSignalChild(path string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	conn := newRPCConn(os.Stdin, os.Stdout, rpcConfig{
		OnRequest: func(_ context.Context, method string, params json.RawMessage) (any, error) {
			switch method {
			case "initialize":
				return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
			case "session/new":
				var p struct {
					Meta map[string]string `json:"_meta"`
				}
				json.Unmarshal(params, &p)
				return map[string]string{"sessionId": p.Meta[metaSessionID]}, nil
			}
			return nil, methodNotFound(method)
		},
	})
	conn.serve(context.Background())
	select {
	case <-term:
		// Written whole, then renamed: the test never reads it half written.
		if os.WriteFile(path+".tmp", []byte("SIGTERM"), 0o600) != nil || os.Rename(path+".tmp", path) != nil {
			return 1
		}
		return 0
	case <-time.After(testTimeout(60 * time.Second)):
		return 1
	}
}

// TestServeKilledSignalsChild: the kernel sends a managed child SIGTERM when
// serve dies, so a child whose channel stays quiet still runs its shutdown.
func TestServeKilledSignalsChild(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "signal")
	sp := startServe(t, []string{"--workspace", t.TempDir()}, roleEnv("death-signal-child", marker))
	sp.newSession(t, "")
	if err := sp.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testTimeout(30 * time.Second))
	for {
		b, err := os.ReadFile(marker)
		if err == nil {
			if string(b) != "SIGTERM" {
				t.Errorf("child wrote %q", b)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the child got no SIGTERM after serve died")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestACPClosedStdoutIsEndOfInput: an editor that closes the agent's stdout
// and keeps its stdin open has ended the connection. The agent's next write
// fails; it runs its shutdown (the background command is killed) and exits
// 0, instead of dying of SIGPIPE with the command left running.
func TestACPClosedStdoutIsEndOfInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(60*time.Second))
	defer cancel()
	cmd := acpguardCmd(t, ctx, []string{"acp"})
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	out := bufio.NewReader(outR)
	call := func(id int, method string, params any) json.RawMessage {
		t.Helper()
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := stdin.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
		for {
			l, err := out.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			var m struct {
				ID     int             `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
			}
			json.Unmarshal(l, &m)
			if m.Method == "" && m.ID == id {
				if m.Result == nil {
					t.Fatalf("%s: %s", method, l)
				}
				return m.Result
			}
		}
	}
	call(1, methodInitialize, initializeParams(""))
	ws := t.TempDir()
	var s struct{ SessionID string }
	json.Unmarshal(call(2, methodSessionNew, map[string]any{"cwd": ws, "mcpServers": []any{}}), &s)
	call(3, methodSessionSetMode, map[string]any{"sessionId": s.SessionID, "modeId": modeYolo})
	call(4, methodSessionPrompt, promptParams(s.SessionID, shellCall("echo $$ > bg.pid; exec sleep 300", true), ""))
	bg := readPIDFile(t, filepath.Join(ws, "bg.pid"))
	t.Cleanup(func() { syscall.Kill(bg, syscall.SIGKILL) })

	outR.Close()
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 5, "method": methodSessionPrompt, "params": promptParams(s.SessionID, "hello", "")})
	if _, err := io.WriteString(stdin, string(line)+"\n"); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signaled() || st.ExitStatus() != 0 {
		t.Errorf("acp after its stdout closed: %v, want exit 0", err)
	}
	if !pidGone(bg, 30*time.Second) {
		t.Errorf("background command %d outlived the agent", bg)
	}
}

// TestRPCBrokenPipeEndsServing: a write that finds the peer's end closed
// ends serve as the end of input does, though the input stays open.
func TestRPCBrokenPipeEndsServing(t *testing.T) {
	inR, inW := mustPipe(t)
	outR, outW := mustPipe(t)
	outR.Close()
	c := newRPCConn(inR, outW, rpcConfig{OnRequest: func(context.Context, string, json.RawMessage) (any, error) { return "ok", nil }})
	served := make(chan error, 1)
	go func() { served <- c.serve(context.Background()) }()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"m"}`+"\n")
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve = %v, want nil (end of the peer)", err)
		}
	case <-time.After(testTimeout(30 * time.Second)):
		t.Fatal("serve still runs after its peer stopped reading")
	}
	if _, err := c.call(context.Background(), "late", nil); err == nil || !strings.Contains(err.Error(), errConnClosed.Error()) {
		t.Errorf("call after the end = %v, want %v", err, errConnClosed)
	}
}

// TestLifelineIsOneThread: every child start runs on the same OS thread, so
// no parent-death signal fires while serve lives.
func TestLifelineIsOneThread(t *testing.T) {
	var tids []int
	for range 3 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			onLifeline(func() { tids = append(tids, syscall.Gettid()) })
		}()
		<-done
	}
	if tids[0] != tids[1] || tids[1] != tids[2] {
		t.Errorf("child starts ran on threads %v, want one", tids)
	}
}
