package datasets_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
)

func TestDataSetSizes(t *testing.T) {
	for i, d := range datasets.DataSetDocs() {
		if got, want := len(d.Data), datasets.DataSetSizes[i]; got != want {
			t.Errorf("%s: %d bytes, want %d", d.Name, got, want)
		}
	}
}

func TestDataSetWellFormedAndDeterministic(t *testing.T) {
	a := datasets.DataSet(500)
	if !bytes.Equal(a, datasets.DataSet(500)) {
		t.Fatal("not deterministic")
	}
	var env struct {
		Orders []struct {
			OrderID     int     `xml:"OrderID"`
			CustomerID  string  `xml:"CustomerID"`
			OrderDate   string  `xml:"OrderDate"`
			ShippedDate string  `xml:"ShippedDate"`
			Freight     float64 `xml:"Freight"`
			ShipName    string  `xml:"ShipName"`
			Comments    string  `xml:"Comments"`
		} `xml:"Body>GetOrdersResponse>GetOrdersResult>NewDataSet>Orders"`
	}
	if err := xml.Unmarshal(a, &env); err != nil {
		t.Fatal(err)
	}
	if len(env.Orders) != 500 {
		t.Fatalf("%d rows", len(env.Orders))
	}
	var unshipped, comments, amp int
	prev := 0
	for _, o := range env.Orders {
		if o.OrderID <= prev {
			t.Fatalf("order IDs not ascending: %d after %d", o.OrderID, prev)
		}
		prev = o.OrderID
		if len(o.CustomerID) != 5 || len(o.OrderDate) != len("1996-07-04T00:00:00+02:00") || o.Freight <= 0 || o.ShipName == "" {
			t.Fatalf("bad row %+v", o)
		}
		if o.ShippedDate == "" {
			unshipped++
		}
		if o.Comments != "" {
			comments++
		}
		if bytes.Contains([]byte(o.Comments), []byte("&")) {
			amp++
		}
	}
	if unshipped == 0 || comments < 200 || comments > 400 || amp == 0 {
		t.Errorf("unshipped %d, comments %d, with & %d: the mix is off", unshipped, comments, amp)
	}
	small := datasets.DataSet(10)
	if i := bytes.Index(small, []byte("</NewDataSet>")); !bytes.HasPrefix(a, small[:i]) {
		t.Error("smaller result is not a prefix of the larger")
	}
}

func TestDataSetPanicsOutOfRange(t *testing.T) {
	for _, n := range []int{0, -1, datasets.MaxDataSetRows + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("DataSet(%d) did not panic", n)
				}
			}()
			datasets.DataSet(n)
		}()
	}
}

func ExampleDataSet() {
	doc := datasets.DataSet(1)
	fmt.Println(len(doc))
	fmt.Printf("%s\n", doc[bytes.Index(doc, []byte("<Orders>")):bytes.Index(doc, []byte("</Orders>"))+9])
	// Output:
	// 602
	// <Orders><OrderID>10248</OrderID><CustomerID>FOLSU</CustomerID><EmployeeID>4</EmployeeID><OrderDate>1996-07-04T00:00:00+02:00</OrderDate><ShippedDate>1996-07-23T00:00:00+02:00</ShippedDate><Freight>11.93</Freight><ShipName>Folk suey Chinese</ShipName><ShipCity>Luleå</ShipCity><ShipCountry>Sweden</ShipCountry></Orders>
}

// BenchmarkDataSet measures generating the largest of the three query
// results' smaller siblings, as a node training its built-in models does.
func BenchmarkDataSet(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if d := datasets.DataSet(100); len(d) == 0 {
			b.Fatal("empty")
		}
	}
}
