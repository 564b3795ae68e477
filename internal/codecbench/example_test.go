package codecbench_test

import (
	"context"
	"fmt"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/datasets"
)

func ExampleRun() {
	in := []codecbench.Input{{Name: "employees-1000", Data: datasets.Employees(1000)}}
	res, _ := codecbench.Run(context.Background(), []string{"identity", "gzip:9"}, in, codecbench.WithMinDuration(time.Millisecond))
	for _, r := range res {
		fmt.Println(r.Codec, r.File, r.BytesIn, r.BytesOut < r.BytesIn/5)
	}
	// Output:
	// identity employees-1000 172124 false
	// gzip:9 employees-1000 172124 true
}
