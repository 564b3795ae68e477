package encoding

// AppendHeader and KindOf let the external tests craft headers (hostile
// ones included) and check kinds.
var (
	AppendHeader = appendHeader
	KindOf       = kindOf
)
