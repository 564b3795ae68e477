module github.com/p2pmsg/p2pmsg/testplans/validate

go 1.26.8

require (
	github.com/BurntSushi/toml v0.4.1
	github.com/testground/testground v0.6.0
)

require (
	github.com/adrg/xdg v0.4.0 // indirect
	github.com/docker/docker v1.4.2-0.20200206084213-b5fc6ea92cde // indirect
	github.com/go-playground/locales v0.14.0 // indirect
	github.com/go-playground/universal-translator v0.18.0 // indirect
	github.com/go-playground/validator/v10 v10.9.0 // indirect
	github.com/golang/snappy v0.0.1 // indirect
	github.com/imdario/mergo v0.3.12 // indirect
	github.com/leodido/go-urn v1.2.1 // indirect
	github.com/mitchellh/go-wordwrap v1.0.1 // indirect
	github.com/rs/xid v1.3.0 // indirect
	github.com/syndtr/goleveldb v1.0.0 // indirect
	go.uber.org/atomic v1.7.0 // indirect
	go.uber.org/multierr v1.6.0 // indirect
	go.uber.org/zap v1.19.0 // indirect
	golang.org/x/crypto v0.0.0-20210711020723-a769d52b0f97 // indirect
	golang.org/x/sys v0.0.0-20211025201205-69cdffdb9359 // indirect
	golang.org/x/text v0.3.6 // indirect
)
