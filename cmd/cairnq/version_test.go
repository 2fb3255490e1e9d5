package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/cairnq/cairnq-go/protocol"
)

// cairnq version prints the module, protocol, schema and Go versions,
// as text and as JSON, and opens no database.
func TestVersion(t *testing.T) {
	want := versionOf(debug.ReadBuildInfo())
	if want.Version == "" || want.GoVersion != runtime.Version() {
		t.Fatalf("versionOf(this test binary) = %+v", want)
	}
	text := fmt.Sprintf("cairnq %s\nprotocol %d, schema %d\n%s %s/%s\n", want.Version,
		protocol.ProtocolVersion, protocol.SchemaVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		if r := ok(t, args...); r.stdout != text || r.stderr != "" {
			t.Errorf("cairnq %s: want\n%s\ngot %s", args[0], text, r)
		}
	}
	var got struct {
		Version         string `json:"version"`
		Module          string `json:"module"`
		ProtocolVersion int    `json:"protocol_version"`
		SchemaVersion   int    `json:"schema_version"`
		GoVersion       string `json:"go_version"`
		Platform        string `json:"platform"`
	}
	decode(t, ok(t, "version", "--json"), &got)
	if got.Version != want.Version || got.Module != "github.com/cairnq/cairnq-go" || got.ProtocolVersion != protocol.ProtocolVersion ||
		got.SchemaVersion != protocol.SchemaVersion || got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version --json = %+v", got)
	}
	if r := cli(t, "version", "extra"); r.code != exitUsage {
		t.Errorf("version extra: want a usage error\n%s", r)
	}
	if r := cli(t, "version", "--db", "x.db"); r.code != exitUsage {
		t.Errorf("version takes no database\n%s", r)
	}
}

func TestVersionOf(t *testing.T) {
	main := func(version string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: modulePath, Version: version}, Settings: settings}
	}
	for _, c := range []struct {
		name     string
		bi       *debug.BuildInfo
		ok       bool
		version  string
		revision string
		modified bool
	}{
		{"no build info", nil, false, "(devel)", "", false},
		{"a checkout", main("(devel)"), true, "(devel)", "", false},
		{"no version recorded", main(""), true, "(devel)", "", false},
		{"go install @v1.2.0", main("v1.2.0"), true, "v1.2.0", "", false},
		{"a stamped checkout", main("v0.0.0-20260101000000-0123456789ab+dirty",
			debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}),
			true, "v0.0.0-20260101000000-0123456789ab+dirty", "0123456789abcdef", true},
		{"a dependency of another program", &debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v9.9.9"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.3.0"}}}, true, "v1.3.0", "", false},
	} {
		v := versionOf(c.bi, c.ok)
		if v.Version != c.version || v.Revision != c.revision || v.Modified != c.modified || v.Module != modulePath ||
			v.ProtocolVersion != protocol.ProtocolVersion || v.SchemaVersion != protocol.SchemaVersion {
			t.Errorf("%s: versionOf = %+v", c.name, v)
		}
		if c.bi != nil && c.bi.GoVersion != "" && v.GoVersion != c.bi.GoVersion {
			t.Errorf("%s: go version %q, want the one the build recorded, %q", c.name, v.GoVersion, c.bi.GoVersion)
		}
	}
}
