from envbuild.cli.app import console

console()
