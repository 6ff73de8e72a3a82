// serve_token.go owns where serve's host token comes from: --token,
// QWEN_SERVER_TOKEN or --token-file, and, in required mode when none is
// given, a random token serve generates and writes to a file only its user
// can read, so that a tool started by serve cannot act as a host just by
// reaching the loopback port. --allow-tokenless-loopback restores Qwen
// Code's tokenless loopback mode, with a warning.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// flagAllowTokenlessLoopback restores tokenless loopback in required mode.
const flagAllowTokenlessLoopback = "allow-tokenless-loopback"

// hostTokenBytes is the size of a generated host token: 256 random bits,
// sent as 64 hex digits.
const hostTokenBytes = 32

// A generated token without --token-file goes to a file of this name in a
// fresh directory (mode 0700) under $XDG_RUNTIME_DIR, or under the system's
// temporary directory when that is not set; both are removed at exit.
const (
	envRuntimeDir         = "XDG_RUNTIME_DIR"
	hostTokenDirPattern   = "acpguard-serve-*"
	hostTokenFileName     = "host-token"
	hostTokenAnnouncement = "acpguard serve: host token in "
)

// resolveHostToken decides serve's host token from the flags and env: the
// value of --token (which wins over QWEN_SERVER_TOKEN, as in Qwen Code) or
// of the variable; or --token-file, read when the file exists and generated
// at start when it does not. --token-file together with either of the
// others is refused. In required mode a loopback daemon with none of them
// gets a generated token unless --allow-tokenless-loopback is given.
func resolveHostToken(opts *serveOptions, token, tokenFile *onceValue, tokenless bool, env *procEnv, hostname string, loopback bool) error {
	var err error
	switch {
	case tokenFile.count > 0 && token.count > 0:
		return usagef("--%s %q and --token: both set; give the host token one way", flagHostTokenFile, tokenFile.value)
	case tokenFile.count > 0 && env.serverTokenSet:
		return usagef("--%s %q and %s: both set; give the host token one way", flagHostTokenFile, tokenFile.value, envServerToken)
	case tokenFile.count > 0:
		err = hostTokenFromFile(opts, tokenFile.value)
	// "Host auth: --token or env QWEN_SERVER_TOKEN"; the flag wins.
	case token.count > 0:
		opts.Token, err = parseSecret("--token", token.value)
	case env.serverTokenSet:
		opts.Token, err = parseSecret(envServerToken, env.serverToken)
	}
	if err != nil {
		return err
	}
	given := opts.Token != "" || opts.GenerateToken
	if tokenless {
		switch {
		case given:
			return usagef("--%s: a host token is also given (--token, --%s or %s); give one or the other", flagAllowTokenlessLoopback, flagHostTokenFile, envServerToken)
		case !loopback:
			return usagef("--%s: --hostname %q is not a loopback address, which always requires a host token", flagAllowTokenlessLoopback, hostname)
		}
		opts.AllowTokenlessLoopback = true
		return nil
	}
	// "Binding a non-loopback address without a token is refused."
	if !loopback && !given {
		return usagef("--hostname %q: a non-loopback address requires --token, --%s or %s", hostname, flagHostTokenFile, envServerToken)
	}
	if !given && opts.Guard.required() {
		opts.GenerateToken = true
	}
	return nil
}

// hostTokenFromFile reads --token-file when the file exists; when nothing
// is there yet, serve generates the token into it at start.
func hostTokenFromFile(opts *serveOptions, path string) error {
	if path == "" {
		return usagef("--%s \"\": must name a file", flagHostTokenFile)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return usagef("--%s %q: %v", flagHostTokenFile, path, err)
	}
	exists, err := secretFileExists(flagHostTokenFile, abs)
	if err != nil {
		return err
	}
	opts.TokenFile = abs
	if !exists {
		opts.GenerateToken = true
		return nil
	}
	opts.Token, err = readSecretFile(flagHostTokenFile, abs)
	return err
}

// hostToken is the host token of a starting serve as the operator sees it.
type hostToken struct {
	file      string // the token file to announce, "" none
	removeDir string // a fresh directory to remove at exit, "" none
}

// prepareHostToken generates the host token when opts asks for one, writes
// it to its file and puts it in opts.Token. It warns once when required mode
// runs without a host token. The caller calls cleanup at exit.
func prepareHostToken(opts *serveOptions, env *procEnv, log *slog.Logger) (*hostToken, error) {
	ht := &hostToken{file: opts.TokenFile}
	if opts.GenerateToken {
		tok, err := randomHex(hostTokenBytes)
		if err != nil {
			return nil, fmt.Errorf("generate the host token: %w", err)
		}
		path := opts.TokenFile
		if path == "" {
			base := os.TempDir()
			if d := env.lookup(envRuntimeDir); filepath.IsAbs(d) {
				base = d
			}
			dir, err := os.MkdirTemp(base, hostTokenDirPattern)
			if err != nil {
				return nil, fmt.Errorf("create a directory for the host token under %q: %w; give --%s FILE", base, err, flagHostTokenFile)
			}
			ht.removeDir = dir
			path = filepath.Join(dir, hostTokenFileName)
		}
		if err := createSecretFile(flagHostTokenFile, path, tok); err != nil {
			ht.cleanup()
			return nil, err
		}
		opts.Token, opts.TokenFile, ht.file = tok, path, path
	}
	if opts.Guard.required() && opts.Token == "" && opts.AllowTokenlessLoopback {
		log.Warn("required mode without a host token (--" + flagAllowTokenlessLoopback + "): every local process, the tools of this daemon included, can act as a host")
	}
	return ht, nil
}

// announce prints the token file's path on its own line, after the
// listening line that hosts parse.
func (ht *hostToken) announce(w io.Writer) {
	if ht.file != "" {
		fmt.Fprintf(w, "%s%s\n", hostTokenAnnouncement, ht.file)
	}
}

// cleanup removes a token file serve generated in a fresh directory; a
// token file named by --token-file stays for the next start to read.
func (ht *hostToken) cleanup() {
	if ht.removeDir != "" {
		os.RemoveAll(ht.removeDir)
	}
}
