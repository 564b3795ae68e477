package lab

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// GridDoc is a document of the grid: a name, its bytes and the MIME type
// it is sent with.
type GridDoc struct {
	Name string
	MIME string
	Data []byte
}

// Document names the grid knows:
//
//	employees-N   the employees document with N records (papers/000)
//	dataset-N     the SOAP/DataSet query result with N rows
//	random-SIZE   SIZE incompressible bytes (64K, 1M), application/octet-stream
var (
	// AllGridDocs are the full grid's documents: the seven employees
	// documents, the three DataSet results (about 600 B, 46 KB, 3.5 MB)
	// and incompressible bytes.
	AllGridDocs = func() []string {
		var out []string
		for _, n := range datasets.EmployeeCounts {
			out = append(out, "employees-"+strconv.Itoa(n))
		}
		for _, n := range datasets.DataSetRows {
			out = append(out, "dataset-"+strconv.Itoa(n))
		}
		return append(out, "random-64K")
	}()
	// DefaultGridDocs are the default run's: a small, a middle and the
	// largest employees document, the two smaller DataSet results and
	// incompressible bytes.
	DefaultGridDocs = []string{"employees-1", "employees-100", "employees-1000", "dataset-1", "dataset-110", "random-64K"}
)

// maxRandomDoc bounds a random-SIZE document.
const maxRandomDoc = 64 << 20

// LoadGridDoc returns the named document.
func LoadGridDoc(name string) (GridDoc, error) {
	kind, arg, ok := strings.Cut(name, "-")
	if !ok {
		return GridDoc{}, fmt.Errorf("%w: document %q (want employees-N, dataset-N or random-SIZE)", ErrGridConfig, name)
	}
	switch kind {
	case "employees":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > datasets.MaxEmployees {
			return GridDoc{}, fmt.Errorf("%w: document %q: records out of [1, %d]", ErrGridConfig, name, datasets.MaxEmployees)
		}
		return GridDoc{Name: name, MIME: message.XMLUTF8, Data: datasets.Employees(n)}, nil
	case "dataset":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > datasets.MaxDataSetRows {
			return GridDoc{}, fmt.Errorf("%w: document %q: rows out of [1, %d]", ErrGridConfig, name, datasets.MaxDataSetRows)
		}
		return GridDoc{Name: name, MIME: message.XMLUTF8, Data: datasets.DataSet(n)}, nil
	case "random":
		sz, err := ParseSizes(arg)
		if err != nil || len(sz) != 1 || sz[0] > maxRandomDoc {
			return GridDoc{}, fmt.Errorf("%w: document %q: want random-SIZE, SIZE 1 byte to 64M (64K, 1M)", ErrGridConfig, name)
		}
		rng := rand.New(rand.NewChaCha8([32]byte{'p', '2', 'p', 'm', 's', 'g'}))
		b := make([]byte, sz[0])
		for i := 0; i < len(b); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8 && i+j < len(b); j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
		return GridDoc{Name: name, MIME: message.OctetStream, Data: b}, nil
	}
	return GridDoc{}, fmt.Errorf("%w: document %q (want employees-N, dataset-N or random-SIZE)", ErrGridConfig, name)
}
