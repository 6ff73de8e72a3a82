// serve_identity.go owns serve's SIGHUP in required mode: it re-runs the
// provider handshake, the one way to make a running serve accept a provider
// that now listens on another socket (restarted as acpguard's own user, or
// moved to another user). Until then every call to such a provider fails
// with category identity. A handshake that fails keeps the provider the
// last successful one met, and says so in the log.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// The log messages of a SIGHUP's handshake; the demo waits for them.
const (
	logHUPAccepted = "provider handshake on SIGHUP accepted"
	logHUPFailed   = "provider handshake on SIGHUP failed: the provider of the last successful handshake stays the only one accepted"
)

// handshakeOnSIGHUP catches SIGHUP until the returned stop is called and
// re-runs the provider handshake for each one, until ctx ends. The daemon's
// WaitGroup owns the goroutine.
func (d *daemon) handshakeOnSIGHUP(ctx context.Context) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				d.rehandshake(ctx)
			}
		}
	}()
	return func() { signal.Stop(hup) }
}

// rehandshake runs one handshake and logs its result.
func (d *daemon) rehandshake(ctx context.Context) {
	before := d.provider.identity()
	if err := d.provider.handshake(ctx); err != nil {
		d.obs.logger().Error(logHUPFailed, "provider", before.String(), "err", err)
		return
	}
	after := d.provider.identity()
	d.obs.logger().Info(logHUPAccepted, "provider", after.String(), "changed", !before.same(after))
}

// hupWatch is a log writer that reports the result of each SIGHUP's
// handshake on results (logHUPAccepted or logHUPFailed), dropping it when
// nobody waits. It lets the demo, which runs serve in its own process,
// wait for serve to accept the provider it restarted.
type hupWatch struct{ results chan string }

func (w hupWatch) Write(p []byte) (int, error) {
	for _, msg := range [...]string{logHUPAccepted, logHUPFailed} {
		if bytes.Contains(p, []byte(msg)) {
			select {
			case w.results <- msg:
			default:
			}
		}
	}
	return len(p), nil
}

// rehandshakeSelf sends SIGHUP to this process, whose serve runs the
// provider handshake again, and waits for the result w reports.
func (w hupWatch) rehandshakeSelf(ctx context.Context, within time.Duration) error {
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		return fmt.Errorf("send SIGHUP to serve: %w", err)
	}
	select {
	case msg := <-w.results:
		if msg != logHUPAccepted {
			return errors.New("serve's handshake with the restarted provider failed")
		}
		return nil
	case <-time.After(within):
		return fmt.Errorf("serve did not run its handshake within %v of SIGHUP", within)
	case <-ctx.Done():
		return ctx.Err()
	}
}
