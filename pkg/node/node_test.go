package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

func TestConflictingKeyOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if _, err := node.New(context.Background(), node.WithEphemeralKey(), node.WithKeyFile(path)); !errors.Is(err, node.ErrBadOption) {
		t.Fatalf("ephemeral + key file: %v", err)
	}
}

func TestIdentityAndAddrs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	n1, err := node.New(context.Background(), node.WithKeyFile(path), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	first, jxta := n1.ID(), n1.JXTAPeerID()
	n1.Close()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", st.Mode(), err)
	}
	n2, err := node.New(context.Background(), node.WithKeyFile(path), node.WithListenAddrs(testutil.LoopbackTCP))
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if n2.ID() != first || n2.JXTAPeerID() != jxta {
		t.Fatal("identity changed across restarts")
	}
	if err := id.VerifyPeerID(n2.JXTAPeerID(), n2.Host().Peerstore().PubKey(n2.ID())); err != nil {
		t.Fatal(err)
	}
	for _, a := range n2.Addrs() {
		if !strings.Contains(a.String(), "/p2p/"+n2.ID().String()) || !strings.HasPrefix(a.String(), "/ip4/127.0.0.1/") {
			t.Fatalf("address %v", a)
		}
	}
	os.Chmod(path, 0o644)
	if _, err := node.New(context.Background(), node.WithKeyFile(path)); !errors.Is(err, node.ErrKeyFile) {
		t.Fatalf("world-readable key accepted: %v", err)
	}
	os.WriteFile(path, []byte("garbage"), 0o600)
	if _, err := node.New(context.Background(), node.WithKeyFile(path)); !errors.Is(err, node.ErrKeyFile) {
		t.Fatalf("garbage key accepted: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []node.Option{node.WithListenAddrs("not-a-multiaddr"), node.WithKeyFile(""), node.WithGroup(id.NullID)} {
		if _, err := node.New(context.Background(), o); !errors.Is(err, node.ErrBadOption) {
			t.Errorf("bad option accepted: %v", err)
		}
	}
}
