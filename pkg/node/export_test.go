package node

// SetDepartedBound sets the bound on departed peers of the nodes started
// next, for a test that cannot wait for MaxDepartedPeers identities; it
// returns a function restoring MaxDepartedPeers.
func SetDepartedBound(n int) (restore func()) {
	departedBound = n
	return func() { departedBound = MaxDepartedPeers }
}
