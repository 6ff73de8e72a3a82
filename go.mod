module acpguard

go 1.26
