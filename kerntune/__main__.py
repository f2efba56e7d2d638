from kerntune.cli import main

main()
