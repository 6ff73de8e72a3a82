// serve_identity.go owns serve's SIGHUP in required mode: it re-runs the
// provider handshake, the one way to make a running serve accept a provider
// that now listens on another socket (restarted as acpguard's own user, or
// moved to another user). Until then every call to such a provider fails
// with category identity. A handshake that fails keeps the provider the
// last successful one met, and says so in the log.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
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
		d.obs.logger().Error("provider handshake on SIGHUP failed: the provider of the last successful handshake stays the only one accepted",
			"provider", before.String(), "err", err)
		return
	}
	after := d.provider.identity()
	d.obs.logger().Info("provider handshake on SIGHUP accepted", "provider", after.String(), "changed", !before.same(after))
}
