package datasets_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
)

func TestEmployeeSizes(t *testing.T) {
	for i, n := range datasets.EmployeeCounts {
		got, want := len(datasets.Employees(n)), datasets.EmployeeSizes[i]
		dev := float64(got-want) / float64(want)
		t.Logf("%4d records: %6d bytes, paper %6d (%+.2f%%)", n, got, want, 100*dev)
		if dev > 0.01 || dev < -0.01 {
			t.Errorf("%d records: %d bytes, want %d within 1%%", n, got, want)
		}
	}
}

func TestEmployeesDeterministicAndDistinct(t *testing.T) {
	a, b := datasets.Employees(1000), datasets.Employees(1000)
	if !bytes.Equal(a, b) {
		t.Fatal("not deterministic")
	}
	var doc struct {
		Employees []struct {
			ID    string `xml:"id,attr"`
			FName string `xml:"fname"`
			LName string `xml:"lname"`
		} `xml:"employee"`
	}
	if err := xml.Unmarshal(a, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Employees) != 1000 {
		t.Fatalf("%d records", len(doc.Employees))
	}
	ids, names := map[string]bool{}, map[string]bool{}
	for _, e := range doc.Employees {
		if ids[e.ID] || names[e.FName+" "+e.LName] {
			t.Fatalf("duplicate record %+v", e)
		}
		ids[e.ID], names[e.FName+" "+e.LName] = true, true
	}
	small := datasets.Employees(50)
	if !bytes.HasPrefix(a, small[:len(small)-len("</employees>\n")]) {
		t.Error("smaller document is not a prefix of the larger")
	}
}

func TestEmployeesPanicsOutOfRange(t *testing.T) {
	for _, n := range []int{0, -1, datasets.MaxEmployees + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Employees(%d) did not panic", n)
				}
			}()
			datasets.Employees(n)
		}()
	}
}

func ExampleEmployees() {
	fmt.Printf("%s", datasets.Employees(1))
	// Output:
	// <?xml version="1.0" encoding="UTF-8"?>
	// <!-- CPA -->
	// <employees>
	//   <employee id="156201">
	//     <fname>Ryan</fname>
	//     <lname>McChomsky</lname>
	//     <age>36</age>
	//     <jobtitle>Cubical Farmer</jobtitle>
	//     <phone>977-2271</phone>
	//   </employee>
	// </employees>
}
