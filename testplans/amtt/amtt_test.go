package main

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/testground/sdk-go/runtime"

	"github.com/p2pmsg/p2pmsg/internal/lab"
)

// The sender's own table and chart head a custom or changed link with
// the link, as `p2pmsg lab amtt` does, and a named profile as it is with
// its name and description; before, every one with its name alone.
func TestOutputsHeadLink(t *testing.T) {
	for _, c := range []struct {
		profile string
		o       lab.LinkOverrides
		want    string
	}{
		{"custom", lab.LinkOverrides{Up: 1_000_000, Down: -1, RTT: 40 * time.Millisecond, Jitter: -1}, "custom (1Mbit/s up, unlimited down, 40ms RTT)"},
		{"dsl", lab.LinkOverrides{Up: -1, Down: -1, RTT: 10 * time.Millisecond, Jitter: -1}, "dsl* (640kbit/s up, 3Mbit/s down, 10ms RTT)"},
		{"dsl", lab.NoOverrides, lab.ProfileLabel("dsl")},
	} {
		label, link, err := lab.ResolveLink(c.profile, c.o)
		if err != nil {
			t.Fatal(err)
		}
		res := []lab.AMTTResult{{Profile: label, Codec: lab.CodecNone, Records: 1, Bytes: 255, Trials: 3, ControlAMTT: time.Second, AMTT: time.Second}}
		files, err := outputs(res, label, link)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(files[outMarkdown], []byte("#### "+c.want+"\n")) {
			t.Errorf("%s: no heading %q:\n%s", label, c.want, files[outMarkdown])
		}
		if !bytes.Contains(files[outChart], []byte("AMTT on "+c.want)) {
			t.Errorf("%s: no chart title %q", label, "AMTT on "+c.want)
		}
		if back, err := lab.ReadAMTTJSON(bytes.NewReader(files[outJSON])); err != nil || len(back) != 1 {
			t.Errorf("%s: JSON %v %v", label, back, err)
		}
	}
}

// A parameter the AMTT engine refuses fails both instances with its
// cause: before, only the sender's run checked them, and the receiver
// failed with "lab: amtt handshake: EOF" once the sender had gone
// (tgrun --param trials=2).
func TestConfigRefusedInEveryRole(t *testing.T) {
	for _, params := range []map[string]string{
		{"trials": "2"},
		{"sizes": "0"},
		{"sizes": "1,1"},
		{"codecs": "gzip,gzip"},
		{"codecs": "seal"},
		{"seed": "0"}, // read as the default, 1: another run's
	} {
		re := &runtime.RunEnv{RunParams: runtime.RunParams{TestInstanceParams: params, TestInstanceCount: 2, TestGroupID: roleReceiver}}
		if _, err := config(re, "dsl"); !errors.Is(err, lab.ErrAMTTConfig) {
			t.Errorf("%v: %v, want %v", params, err, lab.ErrAMTTConfig)
		}
	}
	re := &runtime.RunEnv{RunParams: runtime.RunParams{TestInstanceParams: map[string]string{"trials": "3", "warmup": "0"}, TestInstanceCount: 2}}
	if _, err := config(re, "dsl"); err != nil {
		t.Errorf("trials=3 warmup=0: %v", err)
	}
}
