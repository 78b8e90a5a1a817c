from metaq_py.cli import main

main()
