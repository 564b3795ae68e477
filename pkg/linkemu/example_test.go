package linkemu_test

import (
	"fmt"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

func ExampleLookup() {
	dsl, err := linkemu.Lookup("dsl")
	if err != nil {
		panic(err)
	}
	fmt.Println(dsl.Description)
	fmt.Println("172,491 B up takes", dsl.Link.Up.TransferTime(172491))
	// Output:
	// ADSL: 640 kbit/s up, 3 Mbit/s down, 60 ms RTT
	// 172,491 B up takes 2.1861375s
}
