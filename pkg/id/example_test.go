package id_test

import (
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

func Example() {
	pipe, err := id.Parse("urn:jxta:cbid-59616261646162614e50472050325033eb4f5b5183454c03b3fbb0e378148f9d04")
	if err != nil {
		panic(err)
	}
	fmt.Println(pipe)
	fmt.Println(pipe.Kind(), "in", pipe.Group())
	// Output:
	// urn:jxta:cbid-59616261646162614E50472050325033EB4F5B5183454C03B3FBB0E378148F9D04
	// pipe in urn:jxta:jxta-NetGroup
}
