package swarm

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSwarmMsgJSON: the swarm's message lists come from other Testground
// instances; what UnmarshalJSON takes marshals and reads back as itself.
func FuzzSwarmMsgJSON(f *testing.F) {
	for _, s := range []string{"[0,1,2]", "[2,40,7]", "[]", "[1,2,3,4]", "null", `{"kind":1}`, "[1e3,0,0]", "[-1,-2,-3]", "[9223372036854775807,0,0]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m swarmMsg
		if err := json.Unmarshal(b, &m); err != nil {
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var again swarmMsg
		if err := json.Unmarshal(out, &again); err != nil || again != m {
			t.Fatalf("%s: re-read %+v as %+v (%v)", out, m, again, err)
		}
	})
}

// FuzzReadJSON: swarm.jsonl comes from other Testground instances;
// ReadJSON never panics on it, and what it reads writes out as lines that
// read back to the same lines.
func FuzzReadJSON(f *testing.F) {
	var one bytes.Buffer
	WriteJSON(&one, []Result{{}})
	for _, b := range [][]byte{one.Bytes(), []byte("\n\n{}\n"), []byte("{\n"), []byte("[1,2]\n"), []byte(`{"Peers":-1}`)} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ReadJSON(bytes.NewReader(b))
		if err != nil {
			return
		}
		if n := bytes.Count(b, []byte("\n")) + 1; len(res) > n {
			t.Fatalf("%d results from %d lines", len(res), n)
		}
		var once, twice bytes.Buffer
		if err := WriteJSON(&once, res); err != nil {
			t.Fatal(err)
		}
		again, err := ReadJSON(bytes.NewReader(once.Bytes()))
		if err != nil || len(again) != len(res) {
			t.Fatalf("re-reading %d results: %d, %v", len(res), len(again), err)
		}
		if err := WriteJSON(&twice, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once.Bytes(), twice.Bytes()) {
			t.Fatalf("results changed on a round trip:\n%s\n%s", once.Bytes(), twice.Bytes())
		}
	})
}
