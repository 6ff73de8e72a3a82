// guard_config.go owns the guard's configuration as acp and serve hold
// it: the guard modes, the guard flags and the validated guardConfig the
// provider client is made from (guard_client.go). config.go parses the
// flags and the token into it.
package main

import (
	"net/url"
	"time"
)

// Guard modes; off is the default and any other value is a usage error.
const (
	guardModeOff      = "off"
	guardModeRequired = "required"
)

// The guard flags, shared by acp and serve.
const (
	flagGuardMode     = "external-tool-guard-mode"
	flagGuardEndpoint = "external-tool-guard-endpoint"
	flagGuardTimeout  = "external-tool-guard-timeout-ms"
	// How long serve and acp wait at start for a provider not listening yet.
	flagGuardStartupWait = "external-tool-guard-startup-wait-ms"
)

// guardConfig is a validated guard configuration. In off mode only Mode is set.
type guardConfig struct {
	Mode     string
	Endpoint *url.URL // origin only: scheme, and Host always with its port
	Timeout  time.Duration
	Token    string // never printed, logged or put in an error
	// StartupWait bounds the retries of the first handshake while the
	// provider is not listening yet.
	StartupWait time.Duration
}

func (g guardConfig) required() bool { return g.Mode == guardModeRequired }
