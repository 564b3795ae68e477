package zstdenc_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/zstdenc"
)

// inputs are XML documents and word text at sizes around every boundary
// the encoders have: the minimum window, a block, the small window.
func inputs() [][]byte {
	words := strings.Fields("order shipment invoice customer pallet urgent delivery warehouse Anna Boris Chen Dana Emil Fatima { } : , \" 0 17 2026")
	rng := rand.New(rand.NewPCG(1, 2))
	var text []byte
	for len(text) < zstdenc.SmallWindow+2 {
		text = append(append(text, words[rng.IntN(len(words))]...), ' ')
	}
	xml := datasets.DataSet(2600)
	var in [][]byte
	for _, n := range []int{200, 1024, 1025, 4097, 64 << 10, 128<<10 + 1, zstdenc.SmallWindow - 64<<10, zstdenc.SmallWindow, zstdenc.SmallWindow + 1} {
		in = append(in, text[:n], xml[:n])
	}
	return in
}

// The encoder gives the bytes the level's own encoder gives, at every
// level, with and without a dictionary, for inputs on either side of the
// small window, encoded in turn as a sender does.
func TestSameBytesAsTheLevelsWindow(t *testing.T) {
	in := inputs()
	dict := datasets.DataSet(300)[:64<<10]
	levels := []kzstd.EncoderLevel{kzstd.SpeedFastest, kzstd.SpeedDefault, kzstd.SpeedBetterCompression, kzstd.SpeedBestCompression}
	for _, level := range levels {
		for _, withDict := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dict=%v", level, withDict), func(t *testing.T) {
				opts := []kzstd.EOption{kzstd.WithEncoderLevel(level), kzstd.WithEncoderConcurrency(1), kzstd.WithEncoderCRC(true)}
				prefix := 0
				if withDict {
					opts, prefix = append(opts, kzstd.WithEncoderDictRaw(7, dict)), len(dict)
				}
				ref, err := kzstd.NewWriter(nil, opts...)
				if err != nil {
					t.Fatal(err)
				}
				e, err := zstdenc.New(prefix, opts...)
				if err != nil {
					t.Fatal(err)
				}
				for _, src := range in {
					if got, want := e.EncodeAll(src, nil), ref.EncodeAll(src, nil); !bytes.Equal(got, want) {
						t.Fatalf("%d bytes: got %d bytes of frame, the level's window gives %d", len(src), len(got), len(want))
					}
				}
			})
		}
	}
}

// Encodes at once, each on an encoder of its own, give the bytes the
// level's encoder gives one after the other, whichever encoder of the pool
// takes which input and whatever it encoded before.
func TestSameBytesAtOnce(t *testing.T) {
	in := inputs()
	dict := datasets.DataSet(300)[:64<<10]
	for _, tc := range []struct {
		level    kzstd.EncoderLevel
		withDict bool
	}{{kzstd.SpeedFastest, false}, {kzstd.SpeedBestCompression, true}} {
		t.Run(fmt.Sprintf("%s/dict=%v", tc.level, tc.withDict), func(t *testing.T) {
			opts := []kzstd.EOption{kzstd.WithEncoderLevel(tc.level), kzstd.WithEncoderCRC(true)}
			prefix := 0
			if tc.withDict {
				opts, prefix = append(opts, kzstd.WithEncoderDictRaw(7, dict)), len(dict)
			}
			ref, err := kzstd.NewWriter(nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			want := make([][]byte, len(in))
			for i, src := range in {
				want[i] = ref.EncodeAll(src, nil)
			}
			e, err := zstdenc.New(prefix, opts...)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for g := range 3 { // each from another input on
				wg.Go(func() {
					for k := range in {
						i := (k + g*len(in)/3) % len(in)
						if got := e.EncodeAll(in[i], nil); !bytes.Equal(got, want[i]) {
							t.Errorf("%d bytes: got %d bytes of frame, the level's encoder gives %d", len(in[i]), len(got), len(want[i]))
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// Once an input needs the level's encoder, every input goes to it (with
// the same bytes) and the small encoder is let go.
func TestLargeInputRetiresTheSmallEncoder(t *testing.T) {
	opts := []kzstd.EOption{kzstd.WithEncoderLevel(kzstd.SpeedBetterCompression), kzstd.WithEncoderConcurrency(1)}
	ref, err := kzstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e, err := zstdenc.New(0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	small, large := datasets.DataSet(40), datasets.DataSet(2600)[:zstdenc.SmallWindow+1]
	for i, step := range []struct {
		src      []byte
		hasSmall bool
	}{{small, true}, {large, false}, {small, false}} {
		if got, want := e.EncodeAll(step.src, nil), ref.EncodeAll(step.src, nil); !bytes.Equal(got, want) {
			t.Fatalf("step %d: not the bytes of the level's encoder", i)
		}
		if e.HasSmall() != step.hasSmall {
			t.Fatalf("step %d (%d bytes): small encoder in use %v, want %v", i, len(step.src), e.HasSmall(), step.hasSmall)
		}
		// One caller, one encoder of each kind (the one New builds).
		if small, full := e.Built(); small != b2i(step.hasSmall) || full != 1 {
			t.Fatalf("step %d: %d small encoders and %d of the level's, want %d and 1", i, small, full, b2i(step.hasSmall))
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A larger input while small ones are being encoded and others wait for a
// small encoder: the waiting ones go to the level's encoders, which are
// built as the small ones were, one per encode at once, and the small
// encoders are let go.
func TestLargeInputWhileSmallOnesWait(t *testing.T) {
	opts := []kzstd.EOption{kzstd.WithEncoderLevel(kzstd.SpeedFastest)}
	small, large := datasets.DataSet(3), datasets.DataSet(2600)[:zstdenc.SmallWindow+1]
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	synctest.Test(t, func(t *testing.T) {
		e, atOnce, wg, finish := heldEncoder(t, opts)
		defer finish()
		for range 3 { // two encode, one waits
			wg.Go(func() { e.EncodeAll(small, nil) })
		}
		synctest.Wait()
		if s, f := e.Built(); atOnce.Load() != 2 || s != 2 || f != 1 {
			t.Fatalf("3 small inputs: %d at once, %d small encoders, %d of the level's; want 2, 2, 1", atOnce.Load(), s, f)
		}
		wg.Go(func() { e.EncodeAll(large, nil) })
		synctest.Wait()
		// The large input and the waiting small one each hold one of the
		// level's encoders.
		if s, f := e.Built(); atOnce.Load() != 4 || s != 0 || f != 2 || e.HasSmall() {
			t.Fatalf("then a large input: %d at once, %d small encoders, %d of the level's; want 4, 0, 2", atOnce.Load(), s, f)
		}
		finish()
		if s, f := e.Built(); s != 0 || f != 2 {
			t.Fatalf("afterwards: %d small encoders, %d of the level's; want 0, 2", s, f)
		}
	})
}

// heldEncoder returns an encoder with opts whose encodes wait inside
// their encoder, counted in atOnce, until finish, which lets them go and
// waits for the callers started with wg.
func heldEncoder(t *testing.T, opts []kzstd.EOption) (e *zstdenc.Encoder, atOnce *atomic.Int32, wg *sync.WaitGroup, finish func()) {
	t.Helper()
	e, err := zstdenc.New(0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	atOnce, wg = new(atomic.Int32), new(sync.WaitGroup)
	release := make(chan struct{})
	e.OnHeld(func() { atOnce.Add(1); <-release })
	return e, atOnce, wg, sync.OnceFunc(func() { close(release); wg.Wait() })
}

// Encodes run at once on encoders of their own, as many as the callers
// run up to GOMAXPROCS, and no more are built: a single caller builds one.
// Each case holds every encode inside its encoder until all the callers
// are either there or waiting for an encoder (synctest.Wait), then counts.
func TestEncodesRunAtOnce(t *testing.T) {
	opts := []kzstd.EOption{kzstd.WithEncoderLevel(kzstd.SpeedFastest)}
	src := datasets.DataSet(3)
	for _, tc := range []struct {
		procs, callers int
		wantAtOnce     int // encodes holding an encoder at once
	}{
		{procs: 4, callers: 1, wantAtOnce: 1},
		{procs: 4, callers: 3, wantAtOnce: 3},
		{procs: 2, callers: 5, wantAtOnce: 2},
		{procs: 1, callers: 3, wantAtOnce: 1},
	} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d/callers=%d", tc.procs, tc.callers), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			synctest.Test(t, func(t *testing.T) {
				e, atOnce, wg, finish := heldEncoder(t, opts)
				defer finish()
				outs := make([][]byte, tc.callers)
				for i := range tc.callers {
					wg.Go(func() { outs[i] = e.EncodeAll(src, nil) })
				}
				synctest.Wait()
				if got := int(atOnce.Load()); got != tc.wantAtOnce {
					t.Errorf("%d callers: %d encodes at once, want %d", tc.callers, got, tc.wantAtOnce)
				}
				finish()
				if small, full := e.Built(); small != tc.wantAtOnce || full != 1 {
					t.Errorf("%d callers built %d small encoders and %d of the level's, want %d and 1 (built at New, unused)", tc.callers, small, full, tc.wantAtOnce)
				}
				ref, err := kzstd.NewWriter(nil, opts...)
				if err != nil {
					t.Fatal(err)
				}
				want := ref.EncodeAll(src, nil)
				for i := range outs {
					if !bytes.Equal(outs[i], want) {
						t.Fatalf("caller %d: not the bytes of the level's encoder", i)
					}
				}
			})
		})
	}
}

// The encoders a burst of concurrent encodes built are let go once they
// have idled a minute, all but the most recently used, which a sender
// encoding now and then keeps: a codec that once had a burst does not hold
// every encoder's tables (34 MB each at the best level) for its life.
func TestBurstEncodersLetGo(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	src := datasets.DataSet(3)
	synctest.Test(t, func(t *testing.T) {
		e, err := zstdenc.New(0, kzstd.WithEncoderLevel(kzstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var burst atomic.Bool
		burst.Store(true)
		e.OnHeld(func() {
			if burst.Load() {
				<-release
			}
		})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { e.EncodeAll(src, nil) })
		}
		synctest.Wait()
		burst.Store(false)
		close(release)
		wg.Wait()
		if small, _ := e.Built(); small != 3 {
			t.Fatalf("a burst of 3 encodes built %d encoders, want 3", small)
		}
		// One sender encodes every 20 s: the burst's others idle on.
		for range 6 {
			time.Sleep(20 * time.Second)
			e.EncodeAll(src, nil)
			synctest.Wait()
		}
		if small, _ := e.Built(); small != 1 {
			t.Errorf("2 minutes after the burst, with one encode every 20 s, %d encoders held, want 1", small)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if small, _ := e.Built(); small != 1 {
			t.Errorf("idle for 10 minutes: %d encoders held, want the last used one", small)
		}
	})
}
