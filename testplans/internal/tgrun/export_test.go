package tgrun

// Command is Main with every run's Options starting from base: the tests
// run their own binary as the plan (Binary) instead of building one.
var Command = command
