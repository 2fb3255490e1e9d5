package conformance

// StoreOf is storeOf, for the external tests.
var StoreOf = storeOf
