// config.go owns every operator input: the flag sets of each subcommand, the
// validation of the guard configuration, and the usage texts.
package main

import (
	"net/url"
	"time"
)

const (
	guardModeOff      = "off"
	guardModeRequired = "required"
)

// guardConfig is a validated guard configuration. In off mode only Mode is set.
type guardConfig struct {
	Mode     string
	Endpoint *url.URL
	Timeout  time.Duration
	Token    string // never printed, logged or put in an error
}

func (g guardConfig) required() bool { return g.Mode == guardModeRequired }

type providerOptions struct {
	Listen         string
	PolicyFile     string
	AuditPath      string // "" none, "-" stdout
	AuditArguments bool
	Token          string
}

type acpOptions struct {
	Guard guardConfig
}

type serveOptions struct {
	Hostname           string
	Port               int
	Workspaces         []string
	Token              string // host API token, "" none
	Guard              guardConfig
	DecisionLog        string // "" stderr
	MaxPendingPrompts  int
	AllowSlashCommands []string
}

// STUB: owned by the config helper.
func parseProviderArgs(args []string, sys *system) (providerOptions, error) {
	return providerOptions{}, usagef("unimplemented")
}

// STUB
func parseACPArgs(args []string, sys *system) (acpOptions, error) {
	return acpOptions{}, usagef("unimplemented")
}

// STUB
func parseServeArgs(args []string, sys *system) (serveOptions, error) {
	return serveOptions{}, usagef("unimplemented")
}
