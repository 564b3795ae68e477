package id_test

import (
	"errors"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// TestSeededLikeJXSE: vectors JXSE 2.7 computed for the seed "seed"
// (interop_test.go checks many more against the live jar).
func TestSeededLikeJXSE(t *testing.T) {
	seed := []byte("seed")
	ug := id.MustParse(uuidGroup)
	tests := []struct {
		name string
		make func() (id.ID, error)
		want string
	}{
		{"newPipeID(Net, seed)", func() (id.ID, error) { return id.PipeIDFromSeed(id.NetPeerGroupID, seed) },
			"urn:jxta:cbid-59616261646162614E5047205032503392713D47093741118F31F2A71986C41104"},
		{"newPeerID(Net, seed)", func() (id.ID, error) { return id.PeerIDFromSeed(id.NetPeerGroupID, seed) },
			"urn:jxta:cbid-59616261646162614E5047205032503392713D4709377111CF31F2A71986C41103"},
		{"newCodatID(Net, seed)", func() (id.ID, error) { return id.CodatIDFromSeed(id.NetPeerGroupID, seed) },
			"urn:jxta:cbid-59616261646162614E5047205032503392713D47093741118F31F2A71986C41101"},
		{"newPeerGroupID(seed)", func() (id.ID, error) { return id.PeerGroupIDFromSeed(id.ID{}, seed) },
			"urn:jxta:cbid-92713D47093741118F31F2A71986C41102"},
		{"newPeerGroupID(Net, seed)", func() (id.ID, error) { return id.PeerGroupIDFromSeed(id.NetPeerGroupID, seed) },
			"urn:jxta:cbid-92713D47093741118F31F2A71986C41159616261646162614E5047205032503302"},
		{"newPipeID(uuid group, seed)", func() (id.ID, error) { return id.PipeIDFromSeed(ug, seed) },
			"urn:jxta:uuid-7C7138FBC02047C99EC4CFCEC8761377736565640000400080008004"},
		{"newPeerID(uuid group, seed)", func() (id.ID, error) { return id.PeerIDFromSeed(ug, seed) },
			"urn:jxta:uuid-7C7138FBC02047C99EC4CFCEC8761377736565640000400080008003"},
	}
	for _, tt := range tests {
		got, err := tt.make()
		if err != nil || got.String() != tt.want {
			t.Errorf("%s = %v, %v; JXSE says %s", tt.name, got, err, tt.want)
		}
	}
}

// TestNewShapes: new IDs have the kind, format and group JXSE gives them.
func TestNewShapes(t *testing.T) {
	ug := id.MustParse(uuidGroup)
	cg := id.MustParse(cbidGroup)
	uclass := id.MustParse(uuidSpec).BaseClass()
	must := func(x id.ID, err error) id.ID {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	tests := []struct {
		name   string
		got    id.ID
		kind   id.Kind
		format id.Format
		group  id.ID
	}{
		{"NewPeerGroupID", id.NewPeerGroupID(), id.KindPeerGroup, id.FormatCBID, id.ID{}},
		{"NewSubgroupID(Net)", must(id.NewSubgroupID(id.NetPeerGroupID)), id.KindPeerGroup, id.FormatCBID, id.NetPeerGroupID},
		{"NewSubgroupID(World)", must(id.NewSubgroupID(id.WorldPeerGroupID)), id.KindPeerGroup, id.FormatCBID, id.WorldPeerGroupID},
		{"NewSubgroupID(uuid)", must(id.NewSubgroupID(ug)), id.KindPeerGroup, id.FormatUUID, ug},
		{"NewPeerID(Net)", must(id.NewPeerID(id.NetPeerGroupID)), id.KindPeer, id.FormatCBID, id.NetPeerGroupID},
		{"NewPeerID(uuid)", must(id.NewPeerID(ug)), id.KindPeer, id.FormatUUID, ug},
		{"NewPipeID(World)", must(id.NewPipeID(id.WorldPeerGroupID)), id.KindPipe, id.FormatCBID, id.WorldPeerGroupID},
		{"NewPipeID(cbid)", must(id.NewPipeID(cg)), id.KindPipe, id.FormatCBID, cg},
		{"NewPipeID(uuid)", must(id.NewPipeID(ug)), id.KindPipe, id.FormatUUID, ug},
		{"NewCodatID(cbid)", must(id.NewCodatID(cg)), id.KindCodat, id.FormatCBID, cg},
		{"CodatIDFromSeed(uuid)", must(id.CodatIDFromSeed(ug, []byte{1})), id.KindCodat, id.FormatUUID, ug},
		{"PeerGroupIDFromSeed(uuid)", must(id.PeerGroupIDFromSeed(ug, []byte{1})), id.KindPeerGroup, id.FormatUUID, ug},
		{"NewModuleClassID", id.NewModuleClassID(), id.KindModuleClass, id.FormatCBID, id.ID{}},
		{"NewModuleRoleID(uuid)", must(id.NewModuleRoleID(uclass)), id.KindModuleClass, id.FormatUUID, id.ID{}},
		{"NewModuleSpecID(uuid)", must(id.NewModuleSpecID(uclass)), id.KindModuleSpec, id.FormatUUID, id.ID{}},
	}
	for _, tt := range tests {
		x := tt.got
		if x.Kind() != tt.kind || x.Format() != tt.format || x.Group() != tt.group {
			t.Errorf("%s = %v: %v, %v in %v; want %v, %v in %v", tt.name, x, x.Kind(), x.Format(), x.Group(), tt.kind, tt.format, tt.group)
		}
		if y, err := id.Parse(x.String()); err != nil || y != x {
			t.Errorf("%s = %v re-parses to %v, %v", tt.name, x, y, err)
		}
	}
	class := id.NewModuleClassID()
	spec := must(id.NewModuleSpecID(class))
	role := must(id.NewModuleRoleID(class))
	if spec.BaseClass() != class || role.BaseClass() != class || role == class {
		t.Errorf("class %v: spec %v (base %v), role %v (base %v)", class, spec, spec.BaseClass(), role, role.BaseClass())
	}
	if other := must(id.NewModuleSpecID(class)); other == spec {
		t.Errorf("two specs of %v are both %v", class, spec)
	}
}

func TestNewIsRandom(t *testing.T) {
	seen := map[id.ID]bool{}
	for range 100 {
		for _, f := range []func() (id.ID, error){
			func() (id.ID, error) { return id.NewPeerGroupID(), nil },
			func() (id.ID, error) { return id.NewPeerID(id.NetPeerGroupID) },
			func() (id.ID, error) { return id.NewPipeID(id.NetPeerGroupID) },
		} {
			x, _ := f()
			if seen[x] {
				t.Fatalf("%v made twice", x)
			}
			seen[x] = true
		}
	}
}

func TestSeededIsDeterministic(t *testing.T) {
	g := id.MustParse(cbidGroup)
	for _, f := range []func([]byte) (id.ID, error){
		func(s []byte) (id.ID, error) { return id.PipeIDFromSeed(g, s) },
		func(s []byte) (id.ID, error) { return id.PeerIDFromSeed(g, s) },
		func(s []byte) (id.ID, error) { return id.CodatIDFromSeed(g, s) },
		func(s []byte) (id.ID, error) { return id.PeerGroupIDFromSeed(g, s) },
	} {
		a, _ := f([]byte("alpha"))
		b, _ := f([]byte("alpha"))
		c, _ := f([]byte("beta"))
		if a != b || a == c || a.Group() != g {
			t.Errorf("seeded: alpha %v and %v, beta %v, group %v", a, b, c, a.Group())
		}
	}
}

// TestGroupOfSubgroupMember: IDs made in a group that has a parent carry
// only the group's own UUID, so their Group() is the group without its
// parent, as in JXSE.
func TestGroupOfSubgroupMember(t *testing.T) {
	child := id.MustParse(netChild)
	pipe, err := id.NewPipeID(child)
	if err != nil {
		t.Fatal(err)
	}
	const want = "urn:jxta:cbid-8C22BA1CC9C64EDDA754B6C36F764F3002"
	if g := pipe.Group(); g.String() != want || g == child || !g.Group().IsZero() {
		t.Errorf("pipe %v in %v: group %v, want %v", pipe, child, g, want)
	}
}

func TestNewErrors(t *testing.T) {
	pipe := id.MustParse(netPipe)
	class := id.MustParse(cbidClass)
	tests := []struct {
		name string
		err  error
	}{
		{"NewPipeID(pipe)", second(id.NewPipeID(pipe))},
		{"NewPipeID(Null)", second(id.NewPipeID(id.NullID))},
		{"NewPipeID(zero)", second(id.NewPipeID(id.ID{}))},
		{"PipeIDFromSeed(class)", second(id.PipeIDFromSeed(class, nil))},
		{"NewPeerID(pipe)", second(id.NewPeerID(pipe))},
		{"PeerIDFromSeed(Null)", second(id.PeerIDFromSeed(id.NullID, nil))},
		{"NewCodatID(class)", second(id.NewCodatID(class))},
		{"CodatIDFromSeed(pipe)", second(id.CodatIDFromSeed(pipe, nil))},
		{"NewSubgroupID(Null)", second(id.NewSubgroupID(id.NullID))},
		{"PeerGroupIDFromSeed(pipe)", second(id.PeerGroupIDFromSeed(pipe, nil))},
		{"NewModuleSpecID(group)", second(id.NewModuleSpecID(id.NetPeerGroupID))},
		{"NewModuleSpecID(spec)", second(id.NewModuleSpecID(id.MustParse(uuidSpec)))},
		{"NewModuleRoleID(zero)", second(id.NewModuleRoleID(id.ID{}))},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, id.ErrKind) {
			t.Errorf("%s: error %v, want %v", tt.name, tt.err, id.ErrKind)
		}
	}
}

func second(_ id.ID, err error) error { return err }
