package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/cairnq/cairnq-go/protocol"
)

// modulePath is the module cairnq is built from.
const modulePath = "github.com/cairnq/cairnq-go"

const versionHelp = `Prints the version of cairnq (the module's version as the Go toolchain
recorded it: a release such as v1.2.0 when installed with go install
...@v1.2.0, "(devel)" or a pseudo-version when built from a checkout,
with the commit when the build recorded one), the protocol and schema
versions it speaks and migrates to, and the Go version it was built with.
It opens no database.

--json: {"version": "...", "module": "` + modulePath + `",
"revision": "..." (when recorded), "modified": true (when the checkout
had changes), "protocol_version": N, "schema_version": N,
"go_version": "go1...", "platform": "linux/amd64"}.`

// versionDoc is version --json.
type versionDoc struct {
	Version         string `json:"version"`
	Module          string `json:"module"`
	Revision        string `json:"revision,omitempty"`
	Modified        bool   `json:"modified,omitempty"`
	ProtocolVersion int    `json:"protocol_version"`
	SchemaVersion   int    `json:"schema_version"`
	GoVersion       string `json:"go_version"`
	Platform        string `json:"platform"`
}

func cmdVersion(ctx context.Context, e *env, args []string) error {
	fs := e.flags()
	asJSON := fs.Bool("json", false, "print the versions as one JSON document (shape above)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	v := versionOf(debug.ReadBuildInfo())
	if *asJSON {
		return writeJSON(e.out, v)
	}
	build := ""
	if v.Revision != "" {
		build = " (commit " + v.Revision
		if v.Modified {
			build += ", modified"
		}
		build += ")"
	}
	fmt.Fprintf(e.out, "cairnq %s%s\nprotocol %d, schema %d\n%s %s\n", printable(v.Version), printable(build),
		v.ProtocolVersion, v.SchemaVersion, printable(v.GoVersion), v.Platform)
	return nil
}

// versionOf reads the versions from what debug.ReadBuildInfo returned:
// the version of this module, "(devel)" when the build recorded none.
func versionOf(bi *debug.BuildInfo, ok bool) versionDoc {
	v := versionDoc{
		Version: "(devel)", Module: modulePath, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		ProtocolVersion: protocol.ProtocolVersion, SchemaVersion: protocol.SchemaVersion,
	}
	if !ok || bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	mod := &bi.Main
	if mod.Path != modulePath {
		// Built into another program's binary: this module is a dependency.
		mod = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				mod = d
				break
			}
		}
	}
	if mod != nil {
		if mod.Replace != nil && mod.Replace.Version != "" {
			mod = mod.Replace
		}
		if mod.Version != "" {
			v.Version = mod.Version
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
