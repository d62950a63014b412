module sentin8-cron.example/target

go 1.19
