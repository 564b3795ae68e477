package linkemu_test

import (
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

func TestSwitchChangesLinkOfRunningConn(t *testing.T) {
	lan, dsl := mustProfile(t, "lan").Link, mustProfile(t, "dsl").Link
	synctest.Test(t, func(t *testing.T) {
		sw, err := linkemu.NewSwitch(lan)
		if err != nil {
			t.Fatal(err)
		}
		a, b := net.Pipe()
		sa, err := linkemu.Conn(a, lan, linkemu.WithSwitch(sw))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		defer sa.Close()
		const n = 20 << 10
		buf := make([]byte, n)
		send := func() time.Duration {
			start := time.Now()
			go sa.Write(buf)
			if _, err := io.ReadFull(b, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		if got, want := send(), lan.Up.TransferTime(n); got < want || got > want+want/10 {
			t.Fatalf("on lan: %v, analytic %v", got, want)
		}
		if err := sw.Set(dsl); err != nil {
			t.Fatal(err)
		}
		if got, want := send(), dsl.Up.TransferTime(n); got < want || got > want+want/10 {
			t.Fatalf("after switching to dsl: %v, analytic %v", got, want)
		}
		if sw.Link() != dsl {
			t.Fatal("Link does not return what Set set")
		}
		if err := sw.Set(linkemu.Link{Up: linkemu.Shape{Bandwidth: -1}}); err == nil {
			t.Fatal("Set took an invalid link")
		}
	})
}
