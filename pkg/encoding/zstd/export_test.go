package zstd

// DictID and TrainDictionarySize let the external tests read a
// dictionary's ID and train one of another size.
var (
	DictID              = dictIDOf
	TrainDictionarySize = trainDictionary
)
