package adv_test

import (
	"fmt"
	"strings"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
)

func Example() {
	a := &adv.PipeAdvertisement{
		ID:   id.MustParse("urn:jxta:cbid-59616261646162614E504720503250334104A45E43FD481DAA2D9BC13236A09504"),
		Type: adv.Unicast,
		Name: "chat",
	}
	b, err := a.Marshal()
	if err != nil {
		panic(err)
	}
	fmt.Print(strings.ReplaceAll(string(b), "\t", `\t`)) // make the tab JXSE writes visible
	back, _ := adv.Parse(b)
	fmt.Println(back.Type, back.Name)
	// Output:
	// <?xml version="1.0" encoding="UTF-8"?>
	// <!DOCTYPE jxta:PipeAdvertisement>
	// <jxta:PipeAdvertisement xml:space="preserve" xmlns:jxta="http://jxta.org">
	// \t
	// <Id>urn:jxta:cbid-59616261646162614E504720503250334104A45E43FD481DAA2D9BC13236A09504</Id><Type>JxtaUnicast</Type><Name>chat</Name></jxta:PipeAdvertisement>
	// JxtaUnicast chat
}
