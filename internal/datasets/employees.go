// Package datasets generates the deterministic test documents p2pmsg's
// tests, benchmarks and experiments share.
//
// It sits outside the protocol layers and imports nothing from p2pmsg. Its
// employees documents reproduce the trial data set of Cowan and Kotovskiy's
// Compression Pipe Adapter paper: seven XML files of 1, 50, 100, 250, 500,
// 750 and 1000 fictitious employee records, about 254, 8 720, 17 290,
// 43 208, 86 370, 129 384 and 172 491 bytes. First and last names are
// reused from pools, but never both together, so no two records are alike.
//
// Its second corpus, DataSet, is differently shaped: a SOAP web service's
// answer holding a .NET DataSet of orders (about 600 B, 46 KB and 3.5 MB),
// on one line, with ascending IDs, timestamps, decimals, codes from small
// pools and free text.
package datasets

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// EmployeeCounts are the record counts of the paper's seven documents.
var EmployeeCounts = []int{1, 50, 100, 250, 500, 750, 1000}

// EmployeeSizes are the sizes in bytes the paper reports for them.
var EmployeeSizes = []int{254, 8720, 17290, 43208, 86370, 129384, 172491}

// MaxEmployees is the largest record count Employees accepts (the number
// of distinct first/last name pairs).
const MaxEmployees = 40 * 40

var fnames = [40]string{
	"Ryan", "Anna", "Boris", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Ines",
	"Jamal", "Keiko", "Liam", "Mira", "Noah", "Olga", "Pavel", "Quinn", "Rosa", "Sven",
	"Tariq", "Uma", "Victor", "Wendy", "Xavier", "Yara", "Zane", "Abigail", "Bernard", "Cecilia",
	"Desmond", "Eloise", "Fergus", "Gwendolyn", "Horatio", "Isadora", "Jasper", "Katarina", "Leopold", "Marguerite",
}

var lnames = [40]string{
	"McChomsky", "Smith", "Kowalski", "Nakamura", "Okafor", "Lindqvist", "Moreau", "Petrov", "Garcia", "Chen",
	"Haddad", "O'Brien", "Schmidt", "Rossi", "Novak", "Fischer", "Tanaka", "Dubois", "Kim", "Silva",
	"Andersen", "Baptiste", "Castellano", "Delacroix", "Eriksson", "Fitzgerald", "Gallagher", "Hoffmann", "Iglesias", "Jankowski",
	"Kaczmarek", "Lombardi", "Marchetti", "Nieminen", "Oyelaran", "Papadopoulos", "Quintero", "Rasmussen", "Szabo", "Wu",
}

var jobs = []string{
	"Cubical Farmer", "Engineer", "Accountant", "Salesman", "Clerk", "Analyst",
	"Developer", "Receptionist", "Technician", "Director", "Consultant",
	"Admin", "Designer", "Auditor", "Manager", "Intern",
}

const (
	header = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- CPA -->\n<employees>\n"
	footer = "</employees>\n"
)

// Employees returns the employees document with n records (1 <= n <=
// MaxEmployees). The same n always gives the same bytes, and the document
// with n records starts with the same records as any larger one.
func Employees(n int) []byte {
	if n < 1 || n > MaxEmployees {
		panic(fmt.Sprintf("datasets: %d employees out of range [1, %d]", n, MaxEmployees))
	}
	rng := rand.New(rand.NewPCG(0x15129cfd, 0x6e210892))
	var b bytes.Buffer
	b.Grow(len(header) + len(footer) + n*180)
	b.WriteString(header)
	ids := make(map[int]bool, n)
	for i := range n {
		id := 100000 + rng.IntN(900000)
		for ids[id] {
			id = 100000 + rng.IntN(900000)
		}
		ids[id] = true
		// i -> (i mod 40, (i/40 + i) mod 40) is one-to-one below 1600, so
		// no first/last name pair repeats.
		f, l := fnames[i%40], lnames[(i/40+i)%40]
		age := 18 + rng.IntN(50)
		job := jobs[(i*7+i/len(jobs))%len(jobs)]
		phone := fmt.Sprintf("%03d-%04d", 200+rng.IntN(800), rng.IntN(10000))
		if i == 0 { // the paper's Figure 10 record
			id, age, job, phone = 156201, 36, "Cubical Farmer", "977-2271"
		}
		b.WriteString("  <employee id=\"")
		b.WriteString(strconv.Itoa(id))
		b.WriteString("\">\n    <fname>")
		b.WriteString(f)
		b.WriteString("</fname>\n    <lname>")
		b.WriteString(l)
		b.WriteString("</lname>\n    <age>")
		b.WriteString(strconv.Itoa(age))
		b.WriteString("</age>\n    <jobtitle>")
		b.WriteString(job)
		b.WriteString("</jobtitle>\n    <phone>")
		b.WriteString(phone)
		b.WriteString("</phone>\n  </employee>\n")
	}
	b.WriteString(footer)
	return b.Bytes()
}

// Doc is a named document.
type Doc struct {
	Name string
	Data []byte
}

// EmployeeDocs returns the seven documents, named "employees-N".
func EmployeeDocs() []Doc {
	out := make([]Doc, len(EmployeeCounts))
	for i, n := range EmployeeCounts {
		out[i] = Doc{Name: "employees-" + strconv.Itoa(n), Data: Employees(n)}
	}
	return out
}
