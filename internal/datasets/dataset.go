package datasets

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// The second corpus: the answer of a SOAP (ASMX) web service returning a
// .NET DataSet of orders, written the way ASMX and DataSet.GetXml write it
// (one line, no indentation, namespaces declared on the envelope, null
// columns left out). Unlike the employees documents it mixes ascending IDs,
// timestamps with a UTC offset that changes with daylight saving time,
// decimals, codes from a small pool, and free text with entity references
// that is absent from some rows.

// DataSetRows are the row counts of the three query results, about 600 B,
// 46 KB and 3.5 MB.
var DataSetRows = []int{1, 110, 8350}

// DataSetSizes are their sizes in bytes, pinned by the tests.
var DataSetSizes = []int{602, 45895, 3502796}

// MaxDataSetRows is the largest row count DataSet accepts.
const MaxDataSetRows = 1 << 20

const (
	dsHeader = `<?xml version="1.0" encoding="utf-8"?>` +
		`<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">` +
		`<soap:Body><GetOrdersResponse xmlns="http://tempuri.org/"><GetOrdersResult>` +
		`<NewDataSet xmlns="">`
	dsFooter = `</NewDataSet></GetOrdersResult></GetOrdersResponse></soap:Body></soap:Envelope>`
)

type dsCustomer struct{ id, name, city, country string }

var (
	dsFirst = []string{
		"Alfreds", "Blauer", "Bon", "Chop", "Du", "Ernst", "Folk", "Great", "Hungry", "Island",
		"La", "Lonesome", "Magazzini", "North", "Old", "Piccolo", "Queen", "Rattlesnake", "Santé", "Tortuga",
	}
	dsSecond = []string{
		"Futterkiste", "See Delikatessen", "app'", "suey Chinese", "monde entier", "Handel", "och fä HB", "Lakes Food Market",
		"Coyote Import Store", "Trading", "corne d'abondance", "Pine Restaurant", "Riuniti", "Wind Traders", "World Delicatessen",
	}
	dsPlaces = [][2]string{
		{"Berlin", "Germany"}, {"Mannheim", "Germany"}, {"Marseille", "France"}, {"Reims", "France"}, {"Lyon", "France"},
		{"Bern", "Switzerland"}, {"Genève", "Switzerland"}, {"Nantes", "France"}, {"Eugene", "USA"}, {"Seattle", "USA"},
		{"Portland", "USA"}, {"London", "UK"}, {"Cowes", "UK"}, {"Bergamo", "Italy"}, {"Salzburg", "Austria"},
		{"Stavern", "Norway"}, {"México D.F.", "Mexico"}, {"São Paulo", "Brazil"}, {"Luleå", "Sweden"}, {"Århus", "Denmark"},
	}
	dsWords = strings.Fields(`the a customer order shipment delivery pallet box crate invoice payment
		please call before arrival back door dock loading only weekdays morning afternoon fragile
		keep cold refrigerated goods handle with care leave at reception signature required
		contact warehouse manager about missing items replacement sent separately credit note
		issued discount agreed on phone previous order damaged in transit insurance claim filed
		customs documents attached duplicate copy requested by accounting department urgent
		rush priority standard express courier carrier tracking number updated address changed
		new contact person ask for extension gate code closed on holidays partial delivery
		accepted remainder backordered until next month stock low supplier delayed`)
)

// dsCustomers returns the corpus's 60 customers: company names from two
// pools, IDs of five capitals made from them, as Northwind's are.
func dsCustomers() []dsCustomer {
	out := make([]dsCustomer, 0, 60)
	seen := map[string]bool{}
	for i := 0; len(out) < 60; i++ {
		a, b := dsFirst[i%len(dsFirst)], dsSecond[(i*7+i/len(dsFirst))%len(dsSecond)]
		id := strings.ToUpper(letters(a, 3) + letters(b, 2))
		for seen[id] {
			id = id[:4] + string(rune('A'+(int(id[4]-'A')+1)%26))
		}
		seen[id] = true
		p := dsPlaces[(i*3)%len(dsPlaces)]
		out = append(out, dsCustomer{id: id, name: a + " " + b, city: p[0], country: p[1]})
	}
	return out
}

// letters returns the first n ASCII letters of s, padded with X.
func letters(s string, n int) string {
	var b []byte
	for i := 0; i < len(s) && len(b) < n; i++ {
		if c := s[i] | 0x20; c >= 'a' && c <= 'z' {
			b = append(b, s[i])
		}
	}
	for len(b) < n {
		b = append(b, 'X')
	}
	return string(b)
}

// DataSet returns the query result with rows rows (1 <= rows <=
// MaxDataSetRows). The same count always gives the same bytes, and a
// result starts with the same rows as any larger one.
func DataSet(rows int) []byte {
	if rows < 1 || rows > MaxDataSetRows {
		panic(fmt.Sprintf("datasets: %d rows out of range [1, %d]", rows, MaxDataSetRows))
	}
	rng := rand.New(rand.NewPCG(0x50a9d47a, 0xd1ff6a3))
	custs := dsCustomers()
	day := time.Date(1996, 7, 4, 0, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	b.Grow(len(dsHeader) + len(dsFooter) + rows*460)
	b.WriteString(dsHeader)
	id := 10248
	for i := range rows {
		c := custs[rng.IntN(len(custs))]
		order := day
		at := func(t time.Time) string {
			// .NET writes local midnight with the offset in force that day.
			return t.Format("2006-01-02T15:04:05") + cetOffset(t)
		}
		b.WriteString(`<Orders><OrderID>`)
		b.WriteString(strconv.Itoa(id))
		b.WriteString(`</OrderID><CustomerID>`)
		b.WriteString(c.id)
		b.WriteString(`</CustomerID><EmployeeID>`)
		b.WriteString(strconv.Itoa(1 + rng.IntN(9)))
		b.WriteString(`</EmployeeID><OrderDate>`)
		b.WriteString(at(order))
		b.WriteString(`</OrderDate>`)
		if rng.IntN(25) != 0 { // not shipped yet: the column is null
			b.WriteString(`<ShippedDate>`)
			b.WriteString(at(order.AddDate(0, 0, 1+rng.IntN(35))))
			b.WriteString(`</ShippedDate>`)
		}
		b.WriteString(`<Freight>`)
		// Money as .NET's decimal-to-double prints it: no trailing zeros.
		cents := int(1 + rng.ExpFloat64()*6000)
		b.WriteString(strconv.FormatFloat(float64(cents)/100, 'f', -1, 64))
		b.WriteString(`</Freight><ShipName>`)
		b.WriteString(xmlEscape(c.name))
		b.WriteString(`</ShipName><ShipCity>`)
		b.WriteString(c.city)
		b.WriteString(`</ShipCity><ShipCountry>`)
		b.WriteString(c.country)
		b.WriteString(`</ShipCountry>`)
		if i > 0 && rng.IntN(5) < 3 {
			b.WriteString(`<Comments>`)
			b.WriteString(xmlEscape(comment(rng)))
			b.WriteString(`</Comments>`)
		}
		b.WriteString(`</Orders>`)
		id += 1 + rng.IntN(20)/18 // mostly consecutive, a gap now and then
		day = day.AddDate(0, 0, rng.IntN(3)/2)
	}
	b.WriteString(dsFooter)
	return b.Bytes()
}

// cetOffset is Central European Time's UTC offset on day t: +02:00 from
// the last Sunday of March to the day before the last Sunday of October
// (the EU rule since 1996), +01:00 otherwise. Computed rather than read
// from the tz database so the bytes do not depend on the machine.
func cetOffset(t time.Time) string {
	lastSunday := func(m time.Month) time.Time {
		d := time.Date(t.Year(), m+1, 0, 0, 0, 0, 0, time.UTC) // last day of m
		return d.AddDate(0, 0, -int(d.Weekday()))
	}
	if !t.Before(lastSunday(time.March)) && t.Before(lastSunday(time.October)) {
		return "+02:00"
	}
	return "+01:00"
}

// comment is one to three sentences of free text, some with a number or
// an ampersand.
func comment(rng *rand.Rand) string {
	var s strings.Builder
	for n := 1 + rng.IntN(3); n > 0; n-- {
		words := 4 + rng.IntN(12)
		for w := range words {
			word := dsWords[rng.IntN(len(dsWords))]
			if w == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			} else {
				s.WriteByte(' ')
			}
			s.WriteString(word)
			switch rng.IntN(40) {
			case 0:
				s.WriteString(" " + strconv.Itoa(1+rng.IntN(500)))
			case 1:
				s.WriteString(" & co")
			case 2:
				s.WriteString(",")
			}
		}
		s.WriteString(".")
		if n > 1 {
			s.WriteByte(' ')
		}
	}
	return s.String()
}

// xmlEscaper is built once: a Replacer builds its tables on first use,
// and the documents escape thousands of comments.
var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// xmlEscape escapes text as .NET's XmlWriter does in element content.
func xmlEscape(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	return xmlEscaper.Replace(s)
}

// DataSetDocs returns the three query results, named "dataset-N" for N
// rows.
func DataSetDocs() []Doc {
	out := make([]Doc, len(DataSetRows))
	for i, n := range DataSetRows {
		out[i] = Doc{Name: "dataset-" + strconv.Itoa(n), Data: DataSet(n)}
	}
	return out
}
